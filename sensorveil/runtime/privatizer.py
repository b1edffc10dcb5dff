"""The one class a sensor app needs: load a bundle, call it on frames.

    p = Privatizer.load("bundle_dir", backend="auto")
    y = p(x)   # x: one sample or a batch in sensor units; y: privatized, in sensor units
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.runtime.backends import create_backend, resolve_backend
from sensorveil.runtime.bundle import Bundle, open_bundle
from sensorveil.runtime.errors import BundleError, InputError
from sensorveil.runtime.spec import TensorSpec, check_sensor_input, to_model_units, to_sensor_units
from sensorveil.runtime.substitution import KIND as SUBSTITUTION_KIND
from sensorveil.runtime.substitution import Substitution

# Mechanism kinds whose model output is already the privatized sample. Stochastic kinds
# (substitution) add a numpy sampling step after the model; they register here too.
DETERMINISTIC_KINDS = ("perturbation",)
SUPPORTED_KINDS = DETERMINISTIC_KINDS + (SUBSTITUTION_KIND,)


class Privatizer:
    """A loaded bundle bound to one backend. Thread-compatible, not thread-safe."""

    def __init__(self, bundle: Bundle, backend: str = "auto", seed: int | None = None, output: str | None = None,
                 **backend_options):
        self.bundle = bundle
        self.input_spec = TensorSpec.from_manifest(bundle.manifest["input"])
        self.output_spec = TensorSpec.from_manifest(bundle.manifest["output"])
        self.kind = bundle.manifest["mechanism"].get("kind", "perturbation")
        if self.kind not in SUPPORTED_KINDS:
            raise BundleError(f"mechanism kind {self.kind!r} is not supported by this runtime; "
                              f"expected one of {SUPPORTED_KINDS}")
        # output: "index" or "sample" for substitution bundles (PASS); perturbations emit samples only.
        self.substitution = Substitution(bundle, output) if self.kind == SUBSTITUTION_KIND else None
        if self.substitution is None and output not in (None, "sample"):
            raise InputError(f"output={output!r} is not available for a {self.kind} bundle; expected 'sample' "
                             "(index output exists only for substitution mechanisms such as PASS)")
        self.output_mode = self.substitution.output if self.substitution else "sample"
        self.backend_name = resolve_backend(bundle, backend)
        self.backend = create_backend(bundle, self.backend_name, **backend_options)
        # Randomness comes from the OS unless the caller asks for a replayable seed (DESIGN.md).
        self.rng = np.random.default_rng(seed)

    @classmethod
    def load(cls, path: str | Path, backend: str = "auto", seed: int | None = None, output: str | None = None,
             **backend_options) -> "Privatizer":
        return cls(open_bundle(path), backend=backend, seed=seed, output=output, **backend_options)

    @property
    def manifest(self) -> dict:
        return self.bundle.manifest

    def __call__(self, x) -> np.ndarray:
        batch, single = check_sensor_input(x, self.input_spec)
        out = self.run_model(to_model_units(batch, self.input_spec))
        if self.substitution is not None:   # PASS: out is P(X'|X); draw x' here, with self.rng
            y = self.substitution.finish(out, self.rng)
        else:
            y = to_sensor_units(out, self.output_spec)
        return y[0] if single else y

    def run_model(self, model_batch: np.ndarray) -> np.ndarray:
        """The backend alone, in model units: what benchmarks compare the full call against."""
        return self.backend.run(model_batch)

    def bytes_per_frame(self) -> dict:
        """Bytes that leave the device per privatized frame, for each output mode this bundle serves."""
        spec = self.output_spec
        sample_bytes = int(np.prod(spec.sample_shape)) * spec.dtype.itemsize
        if self.substitution is not None:
            return self.substitution.bytes_per_frame(sample_bytes)
        return {"sample": sample_bytes}

    def describe(self) -> dict:
        return {"bundle": str(self.bundle.root), "mechanism": self.manifest["mechanism"].get("name"),
                **self.backend.describe()}

    def __repr__(self) -> str:
        return (f"Privatizer({self.manifest['mechanism'].get('name')!r}, backend={self.backend_name!r}, "
                f"input={self.input_spec.sample_shape} {self.input_spec.dtype.name})")
