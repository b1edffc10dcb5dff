"""The registry of datasets: one line per dataset, name -> loader. A dataset's options are its loader's
keyword parameters other than ``path``, read from the loader's signature, so a new dataset is one module
plus one line here."""
from __future__ import annotations

import inspect
import os
from typing import Callable

from sensorveil.sdk.datasets.adult import load_adult
from sensorveil.sdk.datasets.base import SensorDataset
from sensorveil.sdk.datasets.digits import load_digits_dataset
from sensorveil.sdk.datasets.motionsense import load_motionsense
from sensorveil.sdk.datasets.npz import load_npz
from sensorveil.sdk.datasets.synthetic_depth import load_synthetic_depth
from sensorveil.sdk.datasets.ujiindoorloc import load_ujiindoorloc
from sensorveil.sdk.datasets.walkway import load_walkway

# A loader without a ``path`` parameter (digits, synthetic-depth) ignores the path it is given.
_LOADERS: dict[str, Callable[..., SensorDataset]] = {
    "digits": load_digits_dataset,
    "ujiindoorloc": load_ujiindoorloc,
    "synthetic-depth": load_synthetic_depth,
    "npz": load_npz,
    "motionsense": load_motionsense,
    "adult": load_adult,
    "walkway": load_walkway,
}
DATASETS = tuple(_LOADERS)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _options(key: str) -> tuple[str, ...]:
    """The options of dataset ``key``: its loader's keyword parameters other than ``path``, in order."""
    parameters = inspect.signature(_LOADERS[key]).parameters.values()
    return tuple(p.name for p in parameters if p.kind in _KEYWORD and p.name != "path")


def load_dataset(name: str, path: str | None = None, **options) -> SensorDataset:
    """Load a registered dataset by name (see :data:`DATASETS`)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {list(DATASETS)}")
    allowed = _options(key)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for dataset {key!r}; expected from {list(allowed)}")
    if path is not None:
        path = os.fspath(path)
    loader = _LOADERS[key]
    parameters = inspect.signature(loader).parameters
    options = {name: _from_text(key, parameters[name], value) for name, value in options.items()}
    if "path" in parameters:
        return loader(path, **options)
    return loader(**options)


def _from_text(key: str, parameter: inspect.Parameter, value):
    """An option given as text (the CLI's --dataset-option KEY=VALUE) as the int or float its loader's
    annotation names; any other value, and text for any other parameter, is passed on unchanged."""
    kind = str(parameter.annotation).split("|")[0].strip()
    if not isinstance(value, str) or kind not in ("int", "float"):
        return value
    try:
        return int(value) if kind == "int" else float(value)
    except ValueError:
        expected = "a whole number" if kind == "int" else "a number"
        raise ValueError(f"dataset {key!r} option {parameter.name}={value!r}: expected {expected}") from None
