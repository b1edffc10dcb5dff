"""npz: any ``.npz`` with ``x`` and one integer array per attribute."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.sdk.datasets.base import SensorDataset

_NPZ_RESERVED = ("x", "sensor_min", "sensor_max", "modality")


def load_npz(path: str | None = None) -> SensorDataset:
    """``.npz`` with ``x`` and one integer array (length N) per attribute;
    optional scalars ``sensor_min``, ``sensor_max`` and ``modality``."""
    if path is None:
        raise ValueError("npz needs path=: a .npz file with array 'x' and one integer array per attribute")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"npz file not found: {p}")
    with np.load(p, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    if "x" not in arrays:
        raise ValueError(f"{p} has no array 'x'; expected 'x' plus one integer array per attribute")
    x = arrays["x"]
    attributes = {}
    for key in sorted(set(arrays) - set(_NPZ_RESERVED)):
        a = arrays[key]
        if a.shape != (len(x),) or not np.issubdtype(a.dtype, np.integer) or (a.size and a.min() < 0):
            raise ValueError(f"{p}: attribute {key!r} must be non-negative integers of shape ({len(x)},), "
                             f"got {a.dtype} {a.shape}")
        attributes[key] = a.astype(np.int64)
    lo = float(arrays["sensor_min"]) if "sensor_min" in arrays else float(x.min()) if x.size else 0.0
    hi = float(arrays["sensor_max"]) if "sensor_max" in arrays else float(x.max()) if x.size else 0.0
    modality = str(arrays["modality"]) if "modality" in arrays else ("vector" if x.ndim == 2 else "image")
    return SensorDataset(
        name=p.stem,
        x=x,
        attributes=attributes,
        num_classes={k: int(v.max()) + 1 if v.size else 0 for k, v in attributes.items()},
        modality=modality,
        sensor_range=(lo, hi),
        units="as stored",
        synthetic=False,
        description=f"loaded from {p}",
        class_names={k: [] for k in attributes},
    )
