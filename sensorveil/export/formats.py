"""One writer per format (Ultralytics-style): ``write_<format>(job) -> {backend: (shared, graph)}``.

A writer exports one graph of the bundle (``job``: sensorveil.export.exporter.GraphJob) into the
bundle directory and returns, per runtime backend that runs the file, the artifact keys shared by
every graph (format, precision, ...) and this graph's own keys (its file, ...). The exporter calls
the writer once per graph, then hashes, writes the manifest and validates every graph the same way.
"""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.export.onnx_export import OPSET, export_onnx, quantize_onnx_int8
from sensorveil.runtime.capabilities import CAPABILITIES, split_reference


def write_onnx(job) -> dict:
    """fp32, or int8 in QDQ form for CPU boards (onnxruntime's int8 kernels; calibrated like tflite's); the
    exporter has checked the precision against the capability table."""
    shared = {"format": "onnx", "opset": OPSET, "precision": job.precision}
    float_path = export_onnx(job.module, torch.from_numpy(job.samples[:1]), job.out_dir / job.file("model.onnx"))
    if job.precision == "fp32":
        return {"onnxruntime": (shared, {"file": float_path.name})}
    calibration = job.calibration()
    calibration_file = job.file("calibration_inputs.npy")
    np.save(job.out_dir / calibration_file, calibration, allow_pickle=False)
    int8_path = quantize_onnx_int8(float_path, calibration, job.out_dir / job.file("model_int8.onnx"))
    float_path.unlink()
    return {"onnxruntime": ({**shared, "quantization": "QDQ, U8S8, weights per channel (reduce_range)"},
                            {"file": int8_path.name,
                             "calibration": {"file": calibration_file, "samples": int(len(calibration)),
                                             "drawn_from": "training split"}})}

def resolve(reference: str):
    """The function a capability table column names ("module:function")."""
    import importlib
    module, name = split_reference(reference)
    return getattr(importlib.import_module(module), name)


# format -> its writer, from the capability table's writer column (writers import their libraries lazily)
FORMAT_WRITERS = {row.format: resolve(row.writer) for row in CAPABILITIES}
