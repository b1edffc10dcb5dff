"""The bundle's self-test (sensorveil.runtime.self_test): a few real inputs in sensor units and what the
runtime returned for them, recorded once validation has passed, so a device refuses the bundle if a later
edit of its units or normalization no longer fits the graph."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sensorveil.runtime import Privatizer
from sensorveil.runtime.bundle import MANIFEST_NAME, file_record, open_bundle
from sensorveil.runtime.errors import BackendUnavailableError
from sensorveil.runtime.self_test import DEFAULT_MAX_MEAN_ERROR, SELF_TEST
from sensorveil.runtime.stages import REPRESENTATION

SAMPLES = 8
FILES = {"input": "self_test_input.npy", "output": "self_test_output.npy"}
# the backend that records the output: the first of these the bundle carries and this machine runs
RECORDING_BACKENDS = ("onnxruntime", "openvino", "litert")


def recording_privatizer(out_dir: Path, artifacts: dict) -> Privatizer | None:
    for backend in RECORDING_BACKENDS:
        if backend in artifacts:
            try:
                return Privatizer.load(out_dir, backend=backend)
            except BackendUnavailableError:
                continue
    return None


def write_self_test(out_dir: Path, sensor_samples: np.ndarray) -> bool:
    """Record the self-test of a one-model bundle (False, nothing written, for any other)."""
    out_dir = Path(out_dir)
    manifest = json.loads((out_dir / MANIFEST_NAME).read_text())
    pipeline = manifest["pipeline"]
    if len(pipeline) != 1 or pipeline[0]["kind"] != "model" or pipeline[0].get("emits") == REPRESENTATION:
        return False
    privatizer = recording_privatizer(out_dir, manifest["artifacts"])
    if privatizer is None:
        return False
    spec = manifest["input"]
    inputs = np.asarray(sensor_samples[:SAMPLES]).reshape((-1,) + tuple(spec["sample_shape"])).astype(spec["dtype"])
    arrays = {"input": inputs, "output": privatizer(inputs)}
    for key, name in FILES.items():
        np.save(out_dir / name, arrays[key], allow_pickle=False)
        manifest["files"][name] = file_record(out_dir / name)
    manifest[SELF_TEST] = {**FILES, "backend": privatizer.backend_name, "samples": int(len(inputs)),
                           "max_mean_error": DEFAULT_MAX_MEAN_ERROR}
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    open_bundle(out_dir)      # read back as a device would, self-test included
    Privatizer(open_bundle(out_dir), backend=privatizer.backend_name)
    return True
