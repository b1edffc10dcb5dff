"""One writer per format (Ultralytics-style): ``write_<format>(job) -> {backend: (shared, graph)}``.

A writer exports one graph of the bundle (``job``: sensorveil.export.exporter.GraphJob) into the
bundle directory and returns, per runtime backend that runs the file, the artifact keys shared by
every graph (format, precision, ...) and this graph's own keys (its file, ...). The exporter calls
the writer once per graph, then hashes, writes the manifest and validates every graph the same way.
"""
from __future__ import annotations

import torch

from sensorveil.export.onnx_export import OPSET, export_onnx


def write_onnx(job) -> dict:
    if job.precision != "fp32":
        raise ValueError("the onnx format is exported in fp32; use --format tflite, openvino or tensorrt "
                         "for fp16 or int8")
    model_file = job.file("model.onnx")
    export_onnx(job.module, torch.from_numpy(job.samples[:1]), job.out_dir / model_file)
    return {"onnxruntime": ({"format": "onnx", "opset": OPSET, "precision": "fp32"}, {"file": model_file})}


from sensorveil.export.openvino_export import write_openvino  # noqa: E402  (writers import their libraries lazily)
from sensorveil.export.tensorrt_export import write_tensorrt  # noqa: E402
from sensorveil.export.tflite_export import write_tflite  # noqa: E402

FORMAT_WRITERS = {"onnx": write_onnx, "tflite": write_tflite, "openvino": write_openvino, "tensorrt": write_tensorrt}
