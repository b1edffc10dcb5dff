"""torch -> ONNX, checked with onnx.checker. The other formats start from this file."""
from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import onnx
import torch

from sensorveil.export.onnx_opsets import drop_unused_opsets

# Opset 13 is the newest that every board's own runtime reads: TensorRT 8.2 on JetPack 4.6 parses up to
# 13, and onnxruntime 1.10 (the last for Python 3.6) refuses opset 16 and later. Every operator our
# graphs use exists there.
OPSET = 13


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path: Path, opset: int = OPSET) -> Path:
    """Export with a dynamic batch axis named 'batch', input 'x', output 'y'.

    We use the TorchScript exporter: it writes old opsets directly and quickly, and its graphs of
    plain Conv/Gemm/Clip are what TensorRT, OpenVINO and the Edge TPU compilers parse best. A module
    with sensor units inside (sensor_units.SensorUnits) traced with a stand-in for a dtype torch lacks
    (uint16) names the real I/O types in ``onnx_io_dtypes``; the file gets them before it is checked.
    """
    path = Path(path)
    model = model.eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=opset,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    if getattr(model, "onnx_io_dtypes", None):
        from sensorveil.export.sensor_units import retype_onnx_io
        retype_onnx_io(path, *model.onnx_io_dtypes)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return path


class _CalibrationReader:
    """onnxruntime.quantization's data reader over real samples, one sample per call (batch 1: the shape
    the device runs)."""

    def __init__(self, samples, input_name: str = "x"):
        self._feeds = iter([{input_name: sample[None]} for sample in samples])

    def get_next(self):
        return next(self._feeds, None)


def quantize_onnx_int8(float_path: Path, calibration, path: Path) -> Path:
    """Static int8 in QDQ form (onnxruntime.quantization): weights int8 per output channel, activations
    uint8 per tensor from MinMax ranges over ``calibration`` (real training samples, model units). The
    I/O stays float32, so the runtime feeds it like the fp32 graph. U8S8 with reduce_range: on AVX2
    CPUs without VNNI onnxruntime's U8S8 kernels can saturate 8-bit weights (its documented caveat), and
    7-bit weights avoid it; the export's int8 privacy audit decides whether the result may ship."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    path = Path(path)
    prepared = path.with_name(path.stem + "_prepared.onnx")
    try:
        quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(path), _CalibrationReader(calibration), quant_format=QuantFormat.QDQ,
                        per_channel=True, reduce_range=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
    finally:
        prepared.unlink(missing_ok=True)
    drop_unused_opsets(path)        # the boards' old onnxruntime refuses the quantizer's unused imports
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return path
