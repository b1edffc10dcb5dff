"""The one class a sensor app needs: load a bundle, call it on frames.

    p = Privatizer.load("bundle_dir", backend="auto")
    y = p(x)   # x: one sample or a batch in sensor units; y: privatized, in sensor units

A bundle's mechanism is a pipeline of stages (its manifest's ``pipeline``): models the backend runs
and numpy steps such as PASS's draw. The Privatizer maps sensor units to model units, runs the
stages in order, and maps the last stage's output back to sensor units when it is in model units.
"""
from pathlib import Path

import numpy as np

from sensorveil.runtime.backends import create_backend, resolve_backend
from sensorveil.runtime.bundle import Bundle, open_bundle
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.spec import TensorSpec, check_sensor_input, to_model_units, to_sensor_units
from sensorveil.runtime.stages import MODEL_UNITS, StageContext, stage_class


MAX_CHUNK = 1024   # samples per pipeline run: model-unit copies and backend buffers stay a few MB


class Privatizer:
    """A loaded bundle bound to one backend. Thread-compatible, not thread-safe."""

    def __init__(self, bundle: Bundle, backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
                 **backend_options):
        self.bundle = bundle
        self.input_spec = TensorSpec.from_manifest(bundle.manifest["input"])
        self.output_spec = TensorSpec.from_manifest(bundle.manifest["output"])
        self.kind = bundle.manifest["mechanism"].get("kind", "perturbation")
        self.backend_name = resolve_backend(bundle, backend)
        # one adapter per graph; a one-model bundle has one graph, "model"
        self.graphs = {name: create_backend(bundle, self.backend_name, graph=name, **backend_options)
                       for name in bundle.graph_names(self.backend_name)}
        self.backend = next(iter(self.graphs.values()))
        context = StageContext(bundle, self.run_graph, output)
        self.stages = [stage_class(spec["kind"])(spec, context) for spec in bundle.pipeline]
        last = self.stages[-1]
        if output is not None and output not in last.output_modes:
            raise InputError(f"output={output!r} is not available for a {self.kind} bundle; expected one of "
                             f"{list(last.output_modes)} (index output exists only for substitution "
                             "mechanisms such as PASS)")
        self.output_mode = getattr(last, "output", None) or last.output_modes[0]
        # the whole call is one backend run when the pipeline is a single model (what streams time apart)
        self.single_model = len(self.stages) == 1 and self.stages[0].kind == "model"
        # Randomness comes from the OS unless the caller asks for a replayable seed (DESIGN.md).
        self.rng = np.random.default_rng(seed)

    @classmethod
    def load(cls, path: "str | Path", backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
             **backend_options) -> "Privatizer":
        return cls(open_bundle(path), backend=backend, seed=seed, output=output, **backend_options)

    @property
    def manifest(self) -> dict:
        return self.bundle.manifest

    @property
    def emits(self) -> str:
        """What the last stage returns: model units, sensor units, a bank index or a representation."""
        return self.stages[-1].emits

    def __call__(self, x) -> np.ndarray:
        batch, single = check_sensor_input(x, self.input_spec)
        if len(batch) > MAX_CHUNK:     # bounded memory: a huge batch goes through in chunks
            return np.concatenate([self(batch[i:i + MAX_CHUNK]) for i in range(0, len(batch), MAX_CHUNK)])
        y = self.run_pipeline(to_model_units(batch, self.input_spec))
        if self.emits == MODEL_UNITS:
            y = to_sensor_units(y, self.output_spec)
        return y[0] if single else y

    def run_pipeline(self, model_batch: np.ndarray) -> np.ndarray:
        """Every stage in order, from a batch in model units."""
        for stage in self.stages:
            model_batch = stage(model_batch, self.rng)
        return model_batch

    def run_graph(self, graph: str, batch: np.ndarray) -> np.ndarray:
        """One of the bundle's graphs on the backend, nothing else."""
        return self.graphs[graph].run(batch)

    def run_model(self, model_batch: np.ndarray) -> np.ndarray:
        """The backend alone on the bundle's first graph, in model units: what benchmarks compare the
        full call against (for a one-model bundle, the whole model)."""
        return self.backend.run(model_batch)

    def bytes_per_frame(self) -> dict:
        """Bytes that leave the device per privatized frame, for each output mode this bundle serves."""
        spec = self.output_spec
        sample_bytes = int(np.prod(spec.sample_shape)) * spec.dtype.itemsize
        return self.stages[-1].bytes_per_frame(sample_bytes) or {"sample": sample_bytes}

    def describe(self) -> dict:
        return {"bundle": str(self.bundle.root), "mechanism": self.manifest["mechanism"].get("name"),
                "pipeline": [stage.kind for stage in self.stages], **self.backend.describe()}

    def __repr__(self) -> str:
        return (f"Privatizer({self.manifest['mechanism'].get('name')!r}, backend={self.backend_name!r}, "
                f"input={self.input_spec.sample_shape} {self.input_spec.dtype.name})")
