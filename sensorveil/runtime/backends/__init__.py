"""One small adapter per backend behind one interface.

An adapter takes the normalized float32 batch the model expects and returns the model's raw
output; everything about sensor units lives in the Privatizer, so adapters stay a few lines
each and cannot disagree about pre- or post-processing. Each adapter imports its library
inside its own module only, so the runtime imports on a device that has just one of them.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Protocol

import numpy as np

from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.errors import BackendUnavailableError

# backend name -> (module, class, the pip package that provides its library)
REGISTRY = {
    "onnxruntime": ("sensorveil.runtime.backends.onnxruntime_backend", "OnnxRuntimeBackend", "onnxruntime"),
}
# Order in which backend="auto" tries what the bundle carries: fastest accelerator first.
AUTO_ORDER = ("tensorrt", "edgetpu", "openvino", "litert", "onnxruntime")


class Backend(Protocol):
    name: str

    def run(self, batch: np.ndarray) -> np.ndarray: ...

    def describe(self) -> dict: ...


def library_available(backend: str) -> bool:
    module = REGISTRY[backend][2]
    return importlib.util.find_spec(module) is not None


def resolve_backend(bundle: Bundle, requested: str) -> str:
    """'auto' picks the first backend the bundle has an artifact for and whose library imports."""
    if requested != "auto":
        if requested not in REGISTRY:
            raise BackendUnavailableError(
                f"unknown backend {requested!r}; expected one of: auto, {', '.join(REGISTRY)}")
        return requested
    carried = [name for name in AUTO_ORDER if name in bundle.manifest["artifacts"] and name in REGISTRY]
    for name in carried:
        if library_available(name):
            return name
    raise BackendUnavailableError(
        f"no backend library for this bundle is installed; the bundle carries {carried or 'nothing usable'}; "
        + "; ".join(f"install '{REGISTRY[name][2]}' for {name}" for name in carried))


def create_backend(bundle: Bundle, name: str, **options) -> Backend:
    module_name, class_name, package = REGISTRY[name]
    if not library_available(name):
        raise BackendUnavailableError(
            f"backend {name!r} needs the Python package '{package}', which is not installed "
            f"(pip install {package})")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(bundle, **options)
