"""ONNX -> OpenVINO IR (model.xml + model.bin) through ``openvino.convert_model``.

FP32 for CPUs; FP16 (``compress_to_fp16``) is what the Neural Compute Stick 2 executes. Targets
that need static shapes (MYRIAD) get the batch axis fixed to 1; others keep it dynamic.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from sensorveil.export.onnx_export import export_onnx

IR_FILE = "model.xml"


def write_openvino(job) -> dict:
    import openvino as ov
    target = job.target or {}
    static = bool(target.get("input_constraints", {}).get("static_shapes"))
    with tempfile.TemporaryDirectory() as scratch:
        onnx_path = export_onnx(job.module, torch.from_numpy(job.samples[:1]), Path(scratch) / "model.onnx")
        model = ov.convert_model(str(onnx_path))
    if static:
        model.reshape({model.input(0): [1, *job.samples.shape[1:]]})
    ir_file = job.file(IR_FILE)
    ov.save_model(model, str(job.out_dir / ir_file), compress_to_fp16=job.precision == "fp16")
    shared = {"format": "openvino-ir", "precision": job.precision, "openvino_version": ov.get_version(),
              "static_batch": 1 if static else None, "device": target.get("openvino_device", "CPU")}
    return {"openvino": (shared, {"file": ir_file, "weights": ir_file.replace(".xml", ".bin")})}
