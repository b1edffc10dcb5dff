"""The one class a sensor app needs: load a bundle, call it on frames.

    p = Privatizer.load("bundle_dir", backend="auto")
    y = p(x)   # x: one sample or a batch in sensor units; y: privatized, in sensor units

A bundle's mechanism is a pipeline of stages (its manifest's ``pipeline``): models the backend runs
and numpy steps such as PASS's draw. The Privatizer maps sensor units to model units, runs the
stages in order, and maps the last stage's output back to sensor units when it is in model units.
A bundle whose one model stage says ``"units": "sensor"`` has that mapping inside its graph; the
Privatizer then only checks the frame and lays it out as the graph takes it (``takes``).

Its surface is loading, calling, its specs (input, output, what the output is) and its description; the
graphs, stages and the pre-processor a bundle declares sit behind ``pipeline`` (runtime.stage_pipeline),
which the runtime's stream drives.
"""
from pathlib import Path

import numpy as np

from sensorveil.runtime.backends import choose_backend
from sensorveil.runtime.bundle import Bundle, open_bundle
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.preprocessor import split_declared_options
from sensorveil.runtime.self_test import run_self_test
from sensorveil.runtime.spec import TensorSpec, check_sensor_input
from sensorveil.runtime.stage_pipeline import StagePipeline

MAX_CHUNK = 1024   # samples per pipeline run: model-unit copies and backend buffers stay a few MB


class Privatizer:
    """A loaded bundle bound to one backend. Thread-compatible, not thread-safe."""

    def __init__(self, bundle: Bundle, backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
                 cpu_policy: str = "dedicated", **options):
        preprocessor_options, backend_options = split_declared_options(options)
        self.input_spec = TensorSpec.from_manifest(bundle.manifest["input"])
        self.output_spec = TensorSpec.from_manifest(bundle.manifest["output"])
        self.kind = bundle.manifest["mechanism"].get("kind", "perturbation")
        # the backend and why it was chosen (backend='auto' names what it passed over): reports print both
        self.backend_name, self.backend_why = choose_backend(bundle, backend)
        self.backend_options = dict(backend_options, cpu_policy=cpu_policy)   # as given (e.g. threads), for reports
        self.pipeline = StagePipeline(bundle, self.backend_name, self.input_spec, self.output_spec, output, seed,
                                      preprocessor_options, **self.backend_options)
        last = self.pipeline.stages[-1]
        if output is not None and output not in last.output_modes:
            raise InputError(f"output={output!r} is not available for a {self.kind} bundle; expected one of "
                             f"{list(last.output_modes)} (index output exists only for substitution "
                             "mechanisms such as PASS)")
        self.output_mode = last.output_mode()
        run_self_test(self)     # the recorded inputs still give the recorded output (self_test.py)

    @classmethod
    def load(cls, path: "str | Path", backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
             trusted_keys=None, min_serial: "int | None" = None, cpu_policy: str = "dedicated",
             **options) -> "Privatizer":
        """``trusted_keys``: public key files (``sensorveil keys generate`` writes signer.pub); with any key
        given here or in SENSORVEIL_TRUSTED_KEYS, an unsigned or wrongly signed bundle is refused.
        ``min_serial``: the lowest signed bundle serial this device accepts (SENSORVEIL_MIN_SERIAL may
        raise it); an older bundle, or one no trusted key vouches for, is refused (no rollback).
        ``cpu_policy``: "dedicated" (the libraries' defaults: fastest when nothing else runs) or "shared"
        (threads that sleep when idle, fewer of them: far less CPU per frame beside other processes;
        ``load_for_stream``'s default). What each backend sets: sensorveil.runtime.backends.cpu_policy.
        ``options``: the backend's (e.g. ``threads``), and those of the frame pre-processor a bundle may declare,
        which a stream builds (runtime.preprocessor.Declared.OPTIONS: a camera bundle's ``scene_still``, the
        operator's picture of the empty place where its released scene starts); one the bundle's own
        pre-processor does not take is refused."""
        return cls(open_bundle(path, trusted_keys=trusted_keys, min_serial=min_serial), backend=backend, seed=seed,
                   output=output, cpu_policy=cpu_policy, **options)

    @property
    def manifest(self) -> dict:
        return self.pipeline.bundle.manifest

    @property
    def signature(self) -> dict:
        """{"status": "trusted" | "signed" | "unsigned" | "not checked", "key_id", "detail"}: only "trusted"
        means a key this device was given vouches for the manifest (sensorveil.runtime.trust)."""
        return self.pipeline.bundle.signature

    @property
    def emits(self) -> str:
        """What the last stage returns: model units, sensor units, a bank index or a representation."""
        return self.pipeline.emits

    @property
    def takes(self) -> str:
        """What the first graph takes: "model" units (the Privatizer normalizes in numpy) or "sensor"
        units (the normalization is inside the graph; the frame goes in in the sensor's dtype)."""
        return self.pipeline.takes

    @property
    def conditioned_on(self) -> "str | None":
        """The attribute whose known value restricts the draw (manifest ``condition``), or None."""
        return self.pipeline.conditioned_on

    def __call__(self, x, known=None, keys=None) -> np.ndarray:
        """``known``: optional, one int per sample, what the device already knows about it (a camera
        tracker's walking direction, -1 where unknown); a conditioned bundle (``conditioned_on``) draws
        only among substitutes that share it. ``keys``: optional, one hashable per sample, who it is
        (a camera tracker's person id); a substitution bundle keeps one substitute per key across calls.
        Other bundles ignore both."""
        batch, single = check_sensor_input(x, self.input_spec)
        known = self.pipeline.check_known(known, len(batch))
        keys = self.pipeline.check_keys(keys, len(batch))
        if len(batch) > MAX_CHUNK:     # bounded memory: a huge batch goes through in chunks
            part = lambda values, i: None if values is None else values[i:i + MAX_CHUNK]  # noqa: E731
            return np.concatenate([self(batch[i:i + MAX_CHUNK], part(known, i), part(keys, i))
                                   for i in range(0, len(batch), MAX_CHUNK)])
        y = self.pipeline.run_checked(batch, known, keys)
        return y[0] if single else y

    def bytes_per_frame(self) -> dict:
        """Bytes that leave the device per privatized frame, for each output mode this bundle serves."""
        return self.pipeline.bytes_per_frame()

    def describe(self) -> dict:
        described = {"bundle": str(self.pipeline.bundle.root), "mechanism": self.manifest["mechanism"].get("name"),
                     "pipeline": None, "signature": self.signature["status"]}
        described.update(self.pipeline.describe())
        return described

    def __repr__(self) -> str:
        return (f"Privatizer({self.manifest['mechanism'].get('name')!r}, backend={self.backend_name!r}, "
                f"input={self.input_spec.sample_shape} {self.input_spec.dtype.name})")
