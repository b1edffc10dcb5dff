"""Every export is validated the same way: the artefact runs through the runtime's own backend
adapter on real samples and must agree with the torch model it came from."""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.export.heartbeat import Heartbeat
from sensorveil.runtime import Privatizer
from sensorveil.runtime.backends import library_available
from sensorveil.runtime.errors import BackendUnavailableError

# fp32: max |runtime - torch| in model units; fp16: the same, divided by the torch output's range
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}
# int8 is judged by what it does to privacy, not by its numeric error: the audit of the int8 bundle
# against the audit of the fp32 model (sensorveil.sdk.audit), each over seeds with 95% intervals.
INT8_AUDIT_SEEDS = 3
DEFAULT_ATTACKER_EPOCHS = 20
INT8_FIGURES = ("probing_acc_private", "probing_acc_useful")


class ValidationError(RuntimeError):
    """An exported artefact disagrees with its torch model beyond the tolerance."""


def compare(bundle_dir, backend: str, graph: str, model: torch.nn.Module, model_inputs: np.ndarray,
            precision: str, to_model_units=None, rounding_step: float = 0.0) -> dict:
    """Run the same inputs through torch and through the runtime's backend, one graph of the bundle;
    return the record. A graph with the sensor units inside gives ``to_model_units`` (its outputs are
    compared in model units, so the tolerances keep their meaning) and, for an integer sensor, the
    ``rounding_step`` one sensor level is in model units: a float32 difference at a .5 can flip one
    rounding, which the runtime's numpy path could do just the same."""
    try:
        privatizer = Privatizer.load(bundle_dir, backend=backend)
    except BackendUnavailableError as error:
        return {"backend": backend, "graph": graph, "precision": precision, "status": "skipped",
                "reason": str(error)}
    with torch.no_grad():
        expected = model(torch.from_numpy(model_inputs)).numpy()
    run_graph = privatizer.pipeline.run_graph
    actual = np.concatenate([run_graph(graph, model_inputs[i:i + 1]) for i in range(len(model_inputs))])
    actual = actual.reshape(expected.shape)
    if to_model_units is not None:
        expected, actual = to_model_units(expected), to_model_units(actual)
    diff = float(np.abs(actual - expected).max())
    output_range = max(float(expected.max() - expected.min()), 1e-12)
    tolerance = TOLERANCE.get(precision)
    error = tolerance_error(actual, expected, precision)
    record = {"backend": backend, "graph": graph, "precision": precision, "samples": int(len(model_inputs)),
              "max_abs_diff": diff, "relative_diff": diff / output_range, "tolerance": tolerance}
    if rounding_step:
        record["rounding_step"] = rounding_step
    if tolerance is None:   # int8: numeric error is recorded; int8_privacy_record decides
        record["status"] = "measured"
    else:
        slack = rounding_step / output_range if precision == "fp16" else rounding_step
        record["status"] = "passed" if error <= tolerance + slack else "failed"
        relation = "<=" if record["status"] == "passed" else ">"
        record["message"] = (f"{backend} ({precision}, graph {graph}) differs from torch by {diff:.3g}"
                             + (f" ({error:.3g} of the output range)" if precision == "fp16" else "")
                             + f" {relation} tolerance {tolerance}"
                             + (f" plus one sensor step ({rounding_step:.3g})" if rounding_step else ""))
    return record


def tolerance_error(actual: np.ndarray, expected: np.ndarray, precision: str) -> float:
    """The figure held against TOLERANCE[precision]: fp16, the largest difference over the output's
    range; other precisions, the largest difference."""
    difference = float(np.abs(actual - expected).max())
    if precision == "fp16":
        return difference / max(float(expected.max() - expected.min()), 1e-12)
    return difference


def int8_privacy_record(bundle_dir, backend: str, run_dir, attacker_epochs: int | None = None,
                        seeds: int = INT8_AUDIT_SEEDS) -> dict:
    """The int8 criterion: the audit (every attacker family, over seeds, with 95% intervals) of the
    trained fp32 model and of the int8 bundle as the device runs it. Quantization fails the export
    when any family's int8 mean accuracy on the private attribute rises above the fp32 interval's
    upper end: privacy moved by more than the measurement can explain."""
    from sensorveil.sdk.assess import audit_path
    attacker_epochs = attacker_epochs or DEFAULT_ATTACKER_EPOCHS
    record = {"backend": backend, "precision": "int8", "seeds": seeds, "attacker_epochs": attacker_epochs,
              "criterion": "every attacker family's int8 accuracy on the private attribute within the fp32 "
                           "audit's 95% interval or below it"}
    if not library_available(backend):   # before the fp32 audit: minutes of attackers for a row that cannot run
        return {**record, "status": "skipped", "reason": f"the {backend} library is not installed here"}
    try:
        with Heartbeat(f"int8 privacy check ({backend})") as beat:   # minutes of attackers: never silent
            beat.say(f"int8 privacy check ({backend}): the audit of the fp32 model, then of the int8 bundle, "
                     f"{seeds} seeds, attackers trained {attacker_epochs} epochs (--skip-int8-privacy-check skips "
                     "it; not recommended)")
            fp32 = audit_path(run_dir, seeds=seeds, attacker_epochs=attacker_epochs,
                              log=lambda line: beat.say(f"int8 privacy check, fp32 model: {line}"))
            int8 = audit_path(bundle_dir, backend=backend, seeds=seeds, attacker_epochs=attacker_epochs,
                              log=lambda line: beat.say(f"int8 privacy check, int8 bundle: {line}"))
    except BackendUnavailableError as error:
        return {**record, "status": "skipped", "reason": str(error)}
    above = {family: int8["private"][family]["mean"] - figure["high"]
             for family, figure in fp32["private"].items() if family in int8["private"]}
    leaks = {family: excess for family, excess in above.items() if excess > 0}
    return {
        **record,
        "fp32": {key: fp32[key] for key in INT8_FIGURES},
        "int8": {key: int8[key] for key in INT8_FIGURES},
        "shift": {key: float(int8[key] - fp32[key]) for key in INT8_FIGURES},
        "families": {family: {"fp32": fp32["private"][family], "int8": int8["private"][family]} for family in above},
        "status": "failed" if leaks else "passed",
        "message": f"{backend} (int8) leaks more than fp32 beyond its 95% interval: "
        + ", ".join(f"{family} +{excess:.3f} above the interval" for family, excess in leaks.items()),
    }


def raise_on_failure(records: list[dict]) -> None:
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        raise ValidationError("; ".join(r["message"] for r in failed))
