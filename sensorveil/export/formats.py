"""One writer per format (Ultralytics-style): ``write_<format>(exporter) -> artifacts``.

A writer saves its artefact(s) into ``exporter.out_dir`` and returns the manifest's
``artifacts`` entries, keyed by the runtime backend that runs each file. The exporter then
hashes, writes the manifest and validates every artefact the same way.
"""
from __future__ import annotations

import torch

from sensorveil.export.onnx_export import OPSET, export_onnx


def write_onnx(exporter) -> dict:
    if exporter.precision != "fp32":
        raise ValueError("the onnx format is exported in fp32; use --format tflite, openvino or tensorrt "
                         "for fp16 or int8")
    export_onnx(exporter.model, torch.from_numpy(exporter.samples[:1]), exporter.out_dir / "model.onnx")
    return {"onnxruntime": {"file": "model.onnx", "format": "onnx", "opset": OPSET, "precision": "fp32"}}


from sensorveil.export.openvino_export import write_openvino  # noqa: E402  (writers import their libraries lazily)
from sensorveil.export.tensorrt_export import write_tensorrt  # noqa: E402
from sensorveil.export.tflite_export import write_tflite  # noqa: E402

FORMAT_WRITERS = {"onnx": write_onnx, "tflite": write_tflite, "openvino": write_openvino, "tensorrt": write_tensorrt}
