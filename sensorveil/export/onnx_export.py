"""torch -> ONNX, checked with onnx.checker. The other formats start from this file."""
from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import onnx
import torch

# Opset 13 is the newest that every board's own runtime reads: TensorRT 8.2 on JetPack 4.6 parses up to
# 13, and onnxruntime 1.10 (the last for Python 3.6) refuses opset 16 and later. Every operator our
# graphs use exists there.
OPSET = 13


def export_onnx(model: torch.nn.Module, example: torch.Tensor, path: Path, opset: int = OPSET) -> Path:
    """Export with a dynamic batch axis named 'batch', input 'x', output 'y'.

    We use the TorchScript exporter: it writes old opsets directly and quickly, and its graphs of
    plain Conv/Gemm/Clip are what TensorRT, OpenVINO and the Edge TPU compilers parse best.
    """
    path = Path(path)
    model = model.eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=opset,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return path
