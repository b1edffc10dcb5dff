"""The one class a sensor app needs: load a bundle, call it on frames.

    p = Privatizer.load("bundle_dir", backend="auto")
    y = p(x)   # x: one sample or a batch in sensor units; y: privatized, in sensor units
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.runtime.backends import create_backend, resolve_backend
from sensorveil.runtime.bundle import Bundle, open_bundle
from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.spec import TensorSpec, check_sensor_input, to_model_units, to_sensor_units

# Mechanism kinds whose model output is already the privatized sample. Stochastic kinds
# (substitution) add a numpy sampling step after the model; they register here too.
DETERMINISTIC_KINDS = ("perturbation",)


class Privatizer:
    """A loaded bundle bound to one backend. Thread-compatible, not thread-safe."""

    def __init__(self, bundle: Bundle, backend: str = "auto", seed: int | None = None, **backend_options):
        self.bundle = bundle
        self.input_spec = TensorSpec.from_manifest(bundle.manifest["input"])
        self.output_spec = TensorSpec.from_manifest(bundle.manifest["output"])
        self.kind = bundle.manifest["mechanism"].get("kind", "perturbation")
        if self.kind not in DETERMINISTIC_KINDS:
            raise BundleError(f"mechanism kind {self.kind!r} is not supported by this runtime; "
                              f"expected one of {DETERMINISTIC_KINDS}")
        self.backend_name = resolve_backend(bundle, backend)
        self.backend = create_backend(bundle, self.backend_name, **backend_options)
        # Randomness comes from the OS unless the caller asks for a replayable seed (DESIGN.md).
        self.rng = np.random.default_rng(seed)

    @classmethod
    def load(cls, path: str | Path, backend: str = "auto", seed: int | None = None, **backend_options) -> "Privatizer":
        return cls(open_bundle(path), backend=backend, seed=seed, **backend_options)

    @property
    def manifest(self) -> dict:
        return self.bundle.manifest

    def __call__(self, x) -> np.ndarray:
        batch, single = check_sensor_input(x, self.input_spec)
        out = self.run_model(to_model_units(batch, self.input_spec))
        y = to_sensor_units(out, self.output_spec)
        return y[0] if single else y

    def run_model(self, model_batch: np.ndarray) -> np.ndarray:
        """The backend alone, in model units: what benchmarks compare the full call against."""
        return self.backend.run(model_batch)

    def describe(self) -> dict:
        return {"bundle": str(self.bundle.root), "mechanism": self.manifest["mechanism"].get("name"),
                **self.backend.describe()}

    def __repr__(self) -> str:
        return (f"Privatizer({self.manifest['mechanism'].get('name')!r}, backend={self.backend_name!r}, "
                f"input={self.input_spec.sample_shape} {self.input_spec.dtype.name})")
