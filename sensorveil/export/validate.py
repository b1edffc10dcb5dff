"""Every export is validated the same way: the artefact runs through the runtime's own backend
adapter on real samples and must agree with the torch model it came from."""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import BackendUnavailableError

# fp32: max |runtime - torch| in model units; fp16: the same, divided by the torch output's range
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}
# int8 is judged by what it does to privacy, not by its numeric error: the probing attack's
# private and useful accuracies must stay within 2 points of the fp32 figures (measured).
INT8_MAX_SHIFT = 0.02
INT8_FIGURES = ("probing_acc_private", "probing_acc_useful")


class ValidationError(RuntimeError):
    """An exported artefact disagrees with its torch model beyond the tolerance."""


def compare(bundle_dir, backend: str, graph: str, model: torch.nn.Module, model_inputs: np.ndarray,
            precision: str) -> dict:
    """Run the same inputs through torch and through the runtime's backend, one graph of the bundle;
    return the record."""
    try:
        privatizer = Privatizer.load(bundle_dir, backend=backend)
    except BackendUnavailableError as error:
        return {"backend": backend, "graph": graph, "precision": precision, "status": "skipped",
                "reason": str(error)}
    with torch.no_grad():
        expected = model(torch.from_numpy(model_inputs)).numpy()
    actual = np.concatenate([privatizer.run_graph(graph, model_inputs[i:i + 1]) for i in range(len(model_inputs))])
    diff = float(np.abs(actual.reshape(expected.shape) - expected).max())
    output_range = max(float(expected.max() - expected.min()), 1e-12)
    tolerance = TOLERANCE.get(precision)
    error = diff / output_range if precision == "fp16" else diff
    record = {"backend": backend, "graph": graph, "precision": precision, "samples": int(len(model_inputs)),
              "max_abs_diff": diff, "relative_diff": diff / output_range, "tolerance": tolerance}
    if tolerance is None:   # int8: numeric error is recorded; int8_privacy_record decides
        record["status"] = "measured"
    else:
        record["status"] = "passed" if error <= tolerance else "failed"
        relation = "<=" if record["status"] == "passed" else ">"
        record["message"] = (f"{backend} ({precision}, graph {graph}) differs from torch by {diff:.3g}"
                             + (f" ({error:.3g} of the output range)" if precision == "fp16" else "")
                             + f" {relation} tolerance {tolerance}")
    return record


def int8_privacy_record(bundle_dir, backend: str, run_dir, attacker_epochs: int | None = None) -> dict:
    """The int8 criterion: privacy and utility under the probing attack, measured on what the int8
    bundle emits, against the fp32 figures. With attacker_epochs=None the fp32 figures are the
    run's own (measured at training with train_run's attacker); otherwise the fp32 model is
    re-measured with the same, cheaper attacker so both sides are comparable."""
    import inspect

    from sensorveil.sdk import runs
    from sensorveil.sdk.assess import evaluate_bundle, evaluate_run
    run = runs.read_run(run_dir)
    record = {"backend": backend, "precision": "int8", "criterion": "probing attack within 2 points of fp32",
              "max_shift": INT8_MAX_SHIFT}
    try:
        if attacker_epochs is None:
            attacker_epochs = inspect.signature(runs.train_run).parameters["attacker_epochs"].default
            reference = run["metrics"]
        else:
            reference = evaluate_run(run_dir, attacker_epochs=attacker_epochs)
        measured = evaluate_bundle(bundle_dir, backend=backend, attacker_epochs=attacker_epochs)
    except BackendUnavailableError as error:
        return {**record, "status": "skipped", "reason": str(error)}
    shifts = {key: float(measured[key] - reference[key]) for key in INT8_FIGURES}
    worst = max(abs(value) for value in shifts.values())
    return {**record, "attacker_epochs": attacker_epochs, "fp32": {key: reference[key] for key in INT8_FIGURES},
            "int8": {key: measured[key] for key in INT8_FIGURES}, "shift": shifts,
            "status": "passed" if worst <= INT8_MAX_SHIFT else "failed",
            "message": f"{backend} (int8) moves the probing-attack accuracies by {shifts} (> {INT8_MAX_SHIFT})"}


def raise_on_failure(records: list[dict]) -> None:
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        raise ValidationError("; ".join(r["message"] for r in failed))
