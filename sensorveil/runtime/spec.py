"""Input/output specs: validation of sensor data and the sensor-units <-> model-units mapping.

The manifest states ``normalization = {"offset": o, "scale": s}``; the model sees
``(x - o) / s`` and its output maps back as ``y * s + o``. Where the bundle's model stage says
``"units": "model"`` (the default, and every bundle exported before the field existed) that mapping
runs here in numpy, one definition for every backend. Where it says ``"units": "sensor"`` the
exporter put the same mapping inside the graph (sensorveil/export/sensor_units.py), so the runtime
only lays the frame out as the graph takes it: one backend call from sensor frame to privatized frame.
"""
from dataclasses import dataclass

import numpy as np

from sensorveil.runtime.errors import InputError

# numpy kinds that carry sensor readings: unsigned, signed integers and floats.
NUMERIC_KINDS = "uif"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    sample_shape: tuple
    model_shape: tuple        # per-sample shape the model takes (batch axis excluded)
    dtype: np.dtype
    low: float
    high: float
    offset: float
    scale: float
    units: str = ""
    accepts: tuple = ()      # integer dtypes the manifest declares convertible (input "accepts_dtypes")

    @classmethod
    def from_manifest(cls, spec: dict) -> "TensorSpec":
        low, high = spec["sensor_range"]
        norm = spec["normalization"]
        return cls(name=spec["name"], sample_shape=tuple(spec["sample_shape"]),
                   model_shape=tuple(spec["model_shape"])[1:], dtype=np.dtype(spec["dtype"]),
                   low=float(low), high=float(high), offset=float(norm["offset"]),
                   scale=float(norm["scale"]), units=spec.get("units", ""),
                   accepts=tuple(np.dtype(name) for name in spec.get("accepts_dtypes", ())))

    def describe(self) -> str:
        return (f"{self.dtype.name} array of shape {self.sample_shape} (one sample) or "
                f"(N, {', '.join(map(str, self.sample_shape))}) (a batch), finite, in sensor units"
                + (f" ({self.units})" if self.units else ""))


def check_sensor_input(x, spec: TensorSpec) -> "tuple[np.ndarray, bool]":
    """Return (batch, was_single) or raise one InputError that says what was expected."""
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as error:
            raise InputError(f"input is not array-like ({error}); expected {spec.describe()}") from None
    if x.dtype.kind not in NUMERIC_KINDS:
        raise InputError(f"input dtype {x.dtype} is not numeric; expected {spec.describe()}")
    if x.dtype.kind in "ui" and x.dtype != spec.dtype and x.dtype not in spec.accepts:
        # integer codes of another sensor (8-bit pixels into a 0..16 bundle, millimetres into metres) would
        # be clipped into range silently; a float is a reading in the bundle's units and is only range-clipped
        raise InputError(
            f"input dtype {x.dtype} is not the bundle's input dtype {spec.dtype.name}; expected "
            f"{spec.describe()} (convert the readings to its units first, or export with input.accepts_dtypes)"
        )
    if x.size == 0:
        raise InputError(f"input is empty (shape {x.shape}); expected {spec.describe()}")
    ndim = len(spec.sample_shape)
    if x.shape == spec.sample_shape:
        single = True
        batch = x[None]
    elif x.ndim == ndim + 1 and x.shape[1:] == spec.sample_shape:
        single = False
        batch = x
    else:
        raise InputError(f"input shape {x.shape} does not match; expected {spec.describe()}")
    if x.dtype.kind == "f" and not np.isfinite(batch).all():
        bad = int(np.count_nonzero(~np.isfinite(batch)))
        raise InputError(f"input has {bad} NaN/inf value(s); expected {spec.describe()}")
    return batch, single


def to_model_units(batch: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Clip to the sensor's valid range, normalize, and lay out as the model expects (float32)."""
    model = batch.astype(np.float32, copy=True)
    np.clip(model, spec.low, spec.high, out=model)
    if spec.offset:
        model -= np.float32(spec.offset)
    model *= np.float32(1.0 / spec.scale)
    return model.reshape((batch.shape[0],) + spec.model_shape)


def to_sensor_units(model_out: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Undo the normalization, clip to the sensor range and cast to the sensor dtype."""
    out = np.asarray(model_out, dtype=np.float32).reshape((model_out.shape[0],) + spec.sample_shape)
    out = out * np.float32(spec.scale)
    if spec.offset:
        out += np.float32(spec.offset)
    np.clip(out, spec.low, spec.high, out=out)
    if spec.dtype.kind in "ui":
        np.rint(out, out=out)
    return out.astype(spec.dtype, copy=False)


def to_graph_sensor_input(batch: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """For a graph that normalizes its input itself: the batch in the sensor's dtype and the model's
    layout. A frame already in the sensor's dtype is only reshaped (no copy); any other dtype is
    clipped to the sensor range (and rounded, for integer sensors) before the cast, so an out-of-range
    float cannot wrap around as a cast alone would let it."""
    if batch.dtype != spec.dtype:
        batch = np.clip(batch, spec.low, spec.high)
        if spec.dtype.kind in "ui":
            batch = np.rint(batch)
        batch = batch.astype(spec.dtype)
    return batch.reshape((batch.shape[0],) + spec.model_shape)


def from_graph_sensor_output(graph_out: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """For a graph that maps its output back to sensor units itself (scaled, offset, rounded and
    clipped in the graph): the sensor's layout and dtype. The cast is exact, or a no-op where the
    graph already returns the sensor dtype."""
    out = graph_out.reshape((graph_out.shape[0],) + spec.sample_shape)
    return out.astype(spec.dtype, copy=False)
