"""Sensor units inside the graph: the manifest's normalization as the model's first and last operations.

    plan = plan_units("onnx", "fp32", target=None, pipeline=pipeline, input_spec=..., output_spec=...)
    module = SensorUnits(model, input_spec, output_spec, plan) if plan.in_graph else model

In: cast from the sensor dtype, clip to the sensor range, subtract the offset, divide by the scale.
Out: multiply by the scale, add the offset, round (integer sensors), clip, cast to the sensor dtype.
The same float32 arithmetic as runtime/spec.py's to_model_units / to_sensor_units, so one backend call
goes from sensor frame to privatized frame and the runtime only reshapes (the manifest's model stage
says ``"units": "sensor"``).

Where the units stay with the runtime (``"units": "model"``), and why:
* int8 (LiteRT/Edge TPU, TensorRT): the Edge TPU maps only quantized operators; a float Cast/Round/Clip
  at either end is not mappable, so the compiler would stop at the first one and leave the graph on the
  CPU (``devices check --device coral-usb`` would no longer say fully mapped). int8 calibration also
  works in model units.
* a target whose operator list lacks one of the operators (the NCS2's MYRIAD plugin has no Round).
* a pipeline of more than one stage (PASS's draw, AttriGuard, Sanitizer: the numpy stages work in model
  units) and a representation (TAPPFL), which has no sensor units to map back to.

Where a format cannot carry the sensor's dtype at the graph's boundary, the graph takes the nearest type
that holds every reading exactly and the runtime's adapter casts to it: TensorRT binds float32 buffers
(and 8.2 has no 16-bit integer I/O), LiteRT has no uint16 CAST from torch (int32 stands in). torch
cannot trace uint16 at all, so ONNX graphs are traced with a stand-in and their I/O retyped after export.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sensorveil.devices import operator_list
from sensorveil.runtime.spec import TensorSpec
from sensorveil.runtime.stages import MODEL_UNITS, REPRESENTATION, SENSOR_UNITS

# the dtypes each format's converter and runtime carry at a graph's boundary
ONNX_CARRIES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float16", "float32", "float64")
CARRIED_DTYPES = {"onnx": ONNX_CARRIES, "openvino": ONNX_CARRIES, "tensorrt": ("float32",),
                  "tflite": ("uint8", "int8", "int16", "int32", "float32")}
# dtypes torch cannot trace to ONNX or LiteRT, and the wider signed type that stands in while tracing
TORCH_STAND_INS = {"uint16": "int32", "uint32": "int64"}
# the operators the units add, as each target's operator list names them
UNITS_OPERATORS = {"onnx": ("Cast", "Clip", "Sub", "Mul", "Add", "Round"),
                   "openvino-ir": ("Convert", "Clamp", "Subtract", "Multiply", "Add", "Round"),
                   "tflite": ("CAST", "MINIMUM", "MAXIMUM", "SUB", "MUL", "ADD", "ROUND")}
TARGET_FORMAT = {"onnx": "onnx", "tensorrt": "onnx", "openvino": "openvino-ir", "tflite": "tflite"}


@dataclass(frozen=True)
class UnitsPlan:
    """Where one export's units go: ``units`` is the manifest's value, ``note`` says why; with units in
    the graph, the numpy dtypes at its boundary (the sensor's, or a type that holds it exactly)."""
    units: str
    note: str
    input_dtype: str | None = None
    output_dtype: str | None = None

    @property
    def in_graph(self) -> bool:
        return self.units == SENSOR_UNITS


def boundary_dtype(fmt: str, sensor_dtype: str) -> str:
    """The sensor's dtype where the format carries it, else one that holds every reading exactly
    (int32 for 16-bit integers, float32 otherwise: what the runtime computed in before)."""
    carried = CARRIED_DTYPES[fmt]
    if sensor_dtype in carried:
        return sensor_dtype
    dtype = np.dtype(sensor_dtype)
    if dtype.kind in "ui" and dtype.itemsize <= 2 and "int32" in carried:
        return "int32"
    return "float32"


def model_units_reason(fmt: str, precision: str, target: dict | None, pipeline: list) -> str | None:
    """Why this export keeps the units in the runtime, or None when the graph can take them."""
    if len(pipeline) != 1 or pipeline[0].get("kind") != "model":
        return "the pipeline is not one model stage: its numpy stages work in model units"
    if pipeline[0].get("emits") == REPRESENTATION:
        return "the model emits a representation, which has no sensor units"
    if precision == "int8":
        return ("int8: the Edge TPU (and TensorRT's int8 calibration) take quantized model units; a float "
                "Cast/Round/Clip at either end would not map to the Edge TPU and would split the graph")
    operators = operator_list(target["name"]) if target else None
    if operators is not None:
        missing = [op for op in UNITS_OPERATORS[TARGET_FORMAT[fmt]] if op not in operators["supported"]]
        if missing:
            return f"{target['name']} has no {', '.join(missing)}, which the units in the graph need"
    return None


def plan_units(fmt: str, precision: str, target: dict | None, pipeline: list, input_spec: dict,
               output_spec: dict, enabled: bool = True) -> UnitsPlan:
    """Whether this export puts the sensor units in the graph, and the note the manifest keeps."""
    reason = "asked for (sensor_units=False)" if not enabled else model_units_reason(fmt, precision, target,
                                                                                     pipeline)
    if reason:
        return UnitsPlan(MODEL_UNITS, "the runtime maps sensor <-> model units in numpy: " + reason)
    dtypes = boundary_dtype(fmt, input_spec["dtype"]), boundary_dtype(fmt, output_spec["dtype"])
    note = "the graph casts, offsets and scales its input and maps its output back to sensor units"
    if dtypes != (input_spec["dtype"], output_spec["dtype"]):
        note += (f"; {fmt} carries {dtypes[0]} in and {dtypes[1]} out in place of the sensor's "
                 f"{input_spec['dtype']}/{output_spec['dtype']} (the runtime casts, exactly)")
    return UnitsPlan(SENSOR_UNITS, note, *dtypes)


def torch_dtype(numpy_dtype: str) -> torch.dtype:
    """The torch dtype that traces a boundary of this numpy dtype (a stand-in where torch has none)."""
    return getattr(torch, TORCH_STAND_INS.get(numpy_dtype, numpy_dtype))


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else x.to(dtype)


class SensorUnits(torch.nn.Module):
    """``model`` (model units in and out) wrapped so it takes and returns sensor units. The arithmetic is
    runtime/spec.py's, in float32, so the graph emits what the runtime's numpy path emitted."""

    def __init__(self, model: torch.nn.Module, input_spec: dict, output_spec: dict, plan: UnitsPlan):
        super().__init__()
        self.model = model
        self.inp, self.out = TensorSpec.from_manifest(input_spec), TensorSpec.from_manifest(output_spec)
        self.round_output = self.out.dtype.kind in "ui"
        self.output_dtype = torch_dtype(plan.output_dtype)
        self.trace_input_dtype = torch_dtype(plan.input_dtype)
        # ONNX I/O types to restore after tracing with a stand-in (onnx_export.export_onnx reads this)
        traced = (str(self.trace_input_dtype).split(".")[1], str(self.output_dtype).split(".")[1])
        wanted = (plan.input_dtype, plan.output_dtype)
        self.onnx_io_dtypes = wanted if traced != wanted else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # casts only where the dtype changes: a float32 -> float32 Cast that a converter folds away
        # would hand the graph's input name to the Cast's output (OpenVINO does)
        x = torch.clamp(cast(x, torch.float32), self.inp.low, self.inp.high)
        if self.inp.offset:
            x = x - self.inp.offset
        y = self.model(x * (1.0 / self.inp.scale)) * self.out.scale
        if self.out.offset:
            y = y + self.out.offset
        if self.round_output:
            y = torch.round(y)
        return cast(torch.clamp(y, self.out.low, self.out.high), self.output_dtype)

    def sensor_samples(self, samples: np.ndarray) -> np.ndarray:
        """Sensor readings (in the model's layout) in the dtype this module is traced with."""
        return samples.astype(str(self.trace_input_dtype).split(".")[1])


def retype_onnx_io(path, input_dtype: str, output_dtype: str) -> None:
    """Give a graph traced with a stand-in dtype (torch has no uint16) its real I/O types: the input's
    first Cast reads any integer type, and the output's last Cast is told the real one."""
    import onnx
    from onnx import helper
    model = onnx.load(str(path))
    graph = model.graph
    elem = {name: helper.np_dtype_to_tensor_dtype(np.dtype(name)) for name in (input_dtype, output_dtype)}
    graph.input[0].type.tensor_type.elem_type = elem[input_dtype]
    graph.output[0].type.tensor_type.elem_type = elem[output_dtype]
    last = next(node for node in graph.node if graph.output[0].name in node.output)
    if last.op_type != "Cast":
        raise RuntimeError(f"{path}: the graph's output comes from {last.op_type}, not the units' Cast")
    next(attribute for attribute in last.attribute if attribute.name == "to").i = elem[output_dtype]
    onnx.save(model, str(path))
