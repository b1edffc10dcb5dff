"""`sensorveil evaluate RUN_DIR|BUNDLE`: privacy and utility figures for a saved run, or for a
bundle exactly as the device runs it (through the runtime, on the bundle's backend)."""
from __future__ import annotations

from pathlib import Path

import torch

from sensorveil.runtime import Privatizer
from sensorveil.runtime.bundle import MANIFEST_NAME
from sensorveil.runtime.spec import to_model_units, to_sensor_units
from sensorveil.sdk import runs
from sensorveil.sdk.evaluation import baselines, evaluate, raw_reference
from sensorveil.sdk.training import apply


def bundle_privatize(privatizer: Privatizer):
    """Wrap a runtime Privatizer as a model-units function: model -> sensor units -> device -> model."""
    def privatize(x: torch.Tensor) -> torch.Tensor:
        sensor = to_sensor_units(x.numpy(), privatizer.input_spec)
        out = privatizer(sensor)
        return torch.from_numpy(to_model_units(out, privatizer.output_spec))
    return privatize


def evaluate_run(run_dir, attacker_epochs: int = 20) -> dict:
    run = runs.read_run(run_dir)
    exp = runs.reload_experiment(run_dir, run)
    if run["mechanism"] == "laplace":
        from sensorveil.sdk.prgan import laplace_privatize
        privatize = laplace_privatize(1.0 / run["selection"]["epsilon"])
    else:
        generator = runs.load_generator(run_dir)
        privatize = lambda x: apply(generator, x)
    task = exp.task
    return {"source": str(run_dir), "mechanism": run["mechanism"], "useful": run["useful"],
            "private": run["private"], **raw_reference(task, exp.fixed), **baselines(task),
            "utility_threshold": exp.config.utility_threshold,
            **evaluate(task, privatize, exp.fixed, attacker_epochs=attacker_epochs, seed=run["seed"])}


def evaluate_bundle(bundle_dir, backend: str = "auto", attacker_epochs: int = 20) -> dict:
    """The probing attack on what the device actually emits. When the training run is still on
    this machine, its fixed D_y and D_z add the paper-protocol figures."""
    privatizer = Privatizer.load(bundle_dir, backend=backend)
    manifest = privatizer.manifest
    run_dir = Path(manifest.get("training", {}).get("run", ""))
    if not (run_dir / runs.RUN_FILE).is_file():
        raise FileNotFoundError(
            f"the bundle's training run {run_dir} is not on this machine; evaluate needs its dataset "
            "record and split seed (copy the run directory back or evaluate the run itself)")
    run = runs.read_run(run_dir)
    exp = runs.reload_experiment(run_dir, run)
    task = exp.task
    return {"source": str(bundle_dir), "backend": privatizer.backend_name,
            "mechanism": manifest["mechanism"]["name"], "useful": run["useful"], "private": run["private"],
            **raw_reference(task, exp.fixed), **baselines(task), "utility_threshold": exp.config.utility_threshold,
            **evaluate(task, bundle_privatize(privatizer), exp.fixed, attacker_epochs=attacker_epochs,
                       seed=run["seed"])}


def evaluate_path(path, backend: str = "auto", attacker_epochs: int = 20) -> dict:
    """Any run directory or bundle, PR-GAN family or PASS."""
    from sensorveil.sdk.pass_eval import evaluate_pass_path, is_pass_path
    if is_pass_path(path):
        return evaluate_pass_path(path, backend, attacker_epochs)
    path = Path(path)
    if (path / MANIFEST_NAME).is_file():
        return evaluate_bundle(path, backend, attacker_epochs)
    if (path / runs.RUN_FILE).is_file():
        return evaluate_run(path, attacker_epochs)
    raise FileNotFoundError(f"expected a run directory (with {runs.RUN_FILE}) or a bundle directory "
                            f"(with {MANIFEST_NAME}), got {path}")
