"""`sensorveil evaluate RUN_DIR|BUNDLE`: privacy and utility figures for a saved run, or for a
bundle exactly as the device runs it (through the runtime, on the bundle's backend). Every
mechanism is measured by its own registered object (sensorveil.sdk.mechanisms)."""
from __future__ import annotations

import json
from pathlib import Path

from sensorveil.runtime.bundle import MANIFEST_NAME
from sensorveil.sdk import mechanisms
from sensorveil.sdk.rundir import RUN_FILE, read_run


def _heading(source, run: dict) -> dict:
    threshold = run.get("reference", {}).get("utility_threshold")
    return {"source": str(source), "mechanism": run["mechanism"], "useful": run["useful"], "private": run["private"],
            **({"utility_threshold": threshold} if threshold is not None else {})}


def evaluate_run(run_dir, attacker_epochs: int = 20) -> dict:
    run = read_run(run_dir)
    return {**_heading(run_dir, run),
            **mechanisms.get(run["mechanism"]).evaluate_run(Path(run_dir), run, attacker_epochs=attacker_epochs)}


def bundle_run_dir(bundle_dir) -> Path:
    """The training run a bundle was exported from: evaluation needs its dataset record and split seed."""
    manifest = json.loads((Path(bundle_dir) / MANIFEST_NAME).read_text())
    run_dir = Path(manifest.get("training", {}).get("run", ""))
    if not (run_dir / RUN_FILE).is_file():
        raise FileNotFoundError(
            f"the bundle's training run {run_dir} is not on this machine; evaluate needs its dataset "
            "record and split seed (copy the run directory back or evaluate the run itself)")
    return run_dir


def evaluate_bundle(bundle_dir, backend: str = "auto", attacker_epochs: int = 20) -> dict:
    """The probing attack on what the device actually emits. When the training run is still on
    this machine, its fixed classifiers (if the mechanism has any) add the paper-protocol figures."""
    run_dir = bundle_run_dir(bundle_dir)
    run = read_run(run_dir)
    mechanism = mechanisms.get(run["mechanism"])
    return {**_heading(bundle_dir, run),
            **mechanism.evaluate_bundle(bundle_dir, backend, run_dir, run, attacker_epochs=attacker_epochs)}


def evaluate_path(path, backend: str = "auto", attacker_epochs: int = 20) -> dict:
    """Any run directory or bundle, whatever its mechanism."""
    path = Path(path)
    if (path / MANIFEST_NAME).is_file():
        return evaluate_bundle(path, backend, attacker_epochs)
    if (path / RUN_FILE).is_file():
        return evaluate_run(path, attacker_epochs)
    raise FileNotFoundError(f"expected a run directory (with {RUN_FILE}) or a bundle directory "
                            f"(with {MANIFEST_NAME}), got {path}")
