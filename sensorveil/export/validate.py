"""Every export is validated the same way: the artefact runs through the runtime's own backend
adapter on real samples and must agree with the torch model it came from."""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import BackendUnavailableError

# max |runtime - torch| in model units (each feature spans [0, 1], so this is relative to range)
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}


class ValidationError(RuntimeError):
    """An exported artefact disagrees with its torch model beyond the tolerance."""


def compare(bundle_dir, backend: str, model: torch.nn.Module, model_inputs: np.ndarray, precision: str) -> dict:
    """Run the same inputs through torch and through the runtime's backend; return the record."""
    try:
        privatizer = Privatizer.load(bundle_dir, backend=backend)
    except BackendUnavailableError as error:
        return {"backend": backend, "status": "skipped", "reason": str(error)}
    with torch.no_grad():
        expected = model(torch.from_numpy(model_inputs)).numpy()
    actual = np.concatenate([privatizer.run_model(model_inputs[i:i + 1]) for i in range(len(model_inputs))])
    diff = float(np.abs(actual.reshape(expected.shape) - expected).max())
    tolerance = TOLERANCE.get(precision)
    record = {"backend": backend, "precision": precision, "samples": int(len(model_inputs)),
              "max_abs_diff": diff, "tolerance": tolerance}
    record["status"] = "passed" if tolerance is None or diff <= tolerance else "failed"
    return record


def raise_on_failure(records: list[dict]) -> None:
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        raise ValidationError("; ".join(
            f"{r['backend']} ({r['precision']}) differs from torch by {r['max_abs_diff']:.3g} "
            f"> tolerance {r['tolerance']}" for r in failed))
