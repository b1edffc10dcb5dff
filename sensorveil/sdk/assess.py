"""`sensorveil evaluate RUN_DIR|BUNDLE`: privacy and utility figures for a saved run, or for a
bundle exactly as the device runs it (through the runtime, on the bundle's backend). Every
mechanism is measured by its own registered object (sensorveil.sdk.mechanisms)."""
from __future__ import annotations

from pathlib import Path

from sensorveil.runtime.bundle import MANIFEST_NAME, read_manifest
from sensorveil.sdk import mechanisms
from sensorveil.sdk.rundir import RUN_FILE, RunRecord, read_run


def _heading(source, run: RunRecord) -> dict:
    threshold = (run.reference or {}).get("utility_threshold")
    return {"source": str(source), "mechanism": run.mechanism, "useful": run.useful, "private": run.private,
            **({"utility_threshold": threshold} if threshold is not None else {})}


def evaluate_run(run_dir, attacker_epochs: int = 20) -> dict:
    run = read_run(run_dir)
    return {**_heading(run_dir, run),
            **mechanisms.get(run.mechanism).evaluate_run(Path(run_dir), run, attacker_epochs=attacker_epochs)}


def bundle_run_dir(bundle_dir) -> Path:
    """The training run a bundle was exported from: evaluation needs its dataset record and split seed."""
    manifest = read_manifest(Path(bundle_dir))   # a corrupt manifest: one error naming the file
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
    mechanism = mechanisms.get(run.mechanism)
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


def audit_path(path, backend: str = "auto", seeds: int = 3, attacker_epochs: int = 20, log=None,
               cache_dir=None) -> dict:
    """The audit (sensorveil.sdk.audit) of a run, or of a bundle exactly as the device runs it: every
    attacker family over ``seeds`` seeds with 95% intervals, the utility probe, Random*; plus the
    paper-protocol figures of the fixed classifiers when the mechanism has them. The flat keys
    (probing_acc_private, tree_acc_private, ...) are the family means, as `evaluate` always wrote.
    ``cache_dir``: keep each attacker's guesses there (sdk/audit_cache.py), so a stopped audit resumes."""
    from sensorveil.sdk.audit import audit, label_shift_weights
    from sensorveil.sdk.datasets import SPLIT_BY_TIME
    from sensorveil.sdk.training import accuracy
    path = Path(path)
    is_bundle = (path / MANIFEST_NAME).is_file()
    if not is_bundle and not (path / RUN_FILE).is_file():
        raise FileNotFoundError(f"expected a run directory (with {RUN_FILE}) or a bundle directory "
                                f"(with {MANIFEST_NAME}), got {path}")
    run_dir = bundle_run_dir(path) if is_bundle else path
    run = read_run(run_dir)
    mechanism = mechanisms.get(run.mechanism)
    heading = _heading(path, run)
    privatizer = None
    if is_bundle:
        from sensorveil.runtime import Privatizer
        privatizer = Privatizer.load(path, backend=backend, **mechanism.audit_load_options)
        heading["backend"] = privatizer.backend_name
    release = mechanism.release(run_dir, run, privatizer)
    if run.dataset.name in SPLIT_BY_TIME:     # class shares move with time: Random* needs it
        release.test_weights = label_shift_weights(release.task)
    cache = None if cache_dir is None else attacker_cache(cache_dir, path, run_dir, heading.get("backend"),
                                                         attacker_epochs)
    result = {**heading, **audit(release, seeds=seeds, attacker_epochs=attacker_epochs, log=log, cache=cache)}
    if release.fixed:
        task, fixed = release.task, release.fixed
        result["protocol_acc_useful"] = accuracy(fixed["D_y"], release.test, task.useful[task.test])
        result["protocol_acc_private"] = accuracy(fixed["D_z"], release.test, task.private[task.test])
    families = result["private"]
    result.update(probing_acc_private=families["neural"]["mean"], tree_acc_private=families["trees"]["mean"],
                  probing_acc_useful=result["useful"]["mean"])
    return result


def attacker_cache(cache_dir, path: Path, run_dir: Path, backend, attacker_epochs: int):
    """The audit cache of this run or bundle: keyed by what its manifest says the device runs (every file by
    hash, the pipeline, input and output; not the export's date, so the same bundle exported again still finds
    its attackers), every file of its run (weights, the split), the backend and the epochs
    (sdk/audit_cache.py adds the code)."""
    import hashlib

    from sensorveil.sdk.audit_cache import AttackerCache

    def digest(file: Path) -> str:
        return hashlib.sha256(file.read_bytes()).hexdigest()
    manifest = read_manifest(path) if (path / MANIFEST_NAME).is_file() else {}
    runs = ("files", "artifacts", "pipeline", "input", "output", "mechanism", "camera")
    return AttackerCache(cache_dir, {"manifest": {key: manifest.get(key) for key in runs},
                                     "run": {f.name: digest(f) for f in sorted(run_dir.iterdir()) if f.is_file()},
                                     "backend": backend, "attacker_epochs": attacker_epochs})
