"""TensorRT bundles: the ONNX model plus build settings; the engine is built on the device.

A TensorRT engine is tied to the GPU and the TensorRT version that built it, so nothing
GPU-specific is built here. The bundle carries ``model.onnx`` (opset chosen for the target's
TensorRT parser), the build settings (precision, workspace, batch range) and, for int8, the
calibration inputs the device's entropy calibrator reads; the runtime's tensorrt adapter builds
the engine on first load and caches it beside the bundle. ``trtexec`` is offered as an optional
path in the manifest. The same ONNX file is also the onnxruntime artefact, which is how the
graph is validated on machines without a GPU.
"""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.export.onnx_export import OPSET, export_onnx

ONNX_FILE = "model.onnx"
CALIBRATION_FILE = "calibration_inputs.npy"
DEFAULT_WORKSPACE_MB = 256
DEFAULT_MAX_BATCH = 8


def trtexec_command(precision: str, workspace_mb: int, sample_shape: tuple, max_batch: int,
                    onnx_file: str = ONNX_FILE) -> str:
    dims = "x".join(str(d) for d in sample_shape)
    flags = {"fp32": "", "fp16": " --fp16", "int8": " --fp16 --int8"}[precision]
    engine = onnx_file.replace(".onnx", ".engine")
    return (f"trtexec --onnx=BUNDLE/{onnx_file} --saveEngine=BUNDLE/engines/trtexec-{engine}{flags} "
            f"--memPoolSize=workspace:{workspace_mb}M --minShapes=x:1x{dims} --optShapes=x:1x{dims} "
            f"--maxShapes=x:{max_batch}x{dims}")


def write_tensorrt(job) -> dict:
    target = job.target or {}
    constraints = target.get("input_constraints", {})
    opset = min(OPSET, constraints.get("max_onnx_opset", OPSET))
    onnx_file = job.file(ONNX_FILE)
    export_onnx(job.module, torch.from_numpy(job.samples[:1]), job.out_dir / onnx_file, opset=opset)
    max_batch = int(constraints.get("max_batch", DEFAULT_MAX_BATCH))
    build = {"precision": job.precision, "workspace_mb": DEFAULT_WORKSPACE_MB, "max_batch": max_batch,
             "tensorrt_version_expected": target.get("tensorrt_version"),
             "engine_cache": "engines/<gpu>-trt<version>-<precision>-<onnx sha256>.engine, built on first load"}
    if job.precision == "int8":
        calibration = job.calibration()
        calibration_file = job.file(CALIBRATION_FILE)
        np.save(job.out_dir / calibration_file, calibration, allow_pickle=False)
        build.update(calibration=calibration_file, calibration_samples=int(len(calibration)),
                     calibrator="IInt8EntropyCalibrator2, cache written to engines/calibration.cache")
    build["trtexec"] = trtexec_command(job.precision, DEFAULT_WORKSPACE_MB, job.samples.shape[1:], max_batch,
                                       onnx_file)
    graph = {"file": onnx_file, "input_shape": list(job.samples.shape[1:])}
    return {"tensorrt": ({"format": "onnx", "opset": opset, "precision": job.precision}, {**graph, "build": build}),
            # the fp32 graph TensorRT builds from, validated here through onnxruntime
            "onnxruntime": ({"format": "onnx", "opset": opset, "precision": "fp32"}, graph)}
