"""The one class a sensor app needs: load a bundle, call it on frames.

    p = Privatizer.load("bundle_dir", backend="auto")
    y = p(x)   # x: one sample or a batch in sensor units; y: privatized, in sensor units

A bundle's mechanism is a pipeline of stages (its manifest's ``pipeline``): models the backend runs
and numpy steps such as PASS's draw. The Privatizer maps sensor units to model units, runs the
stages in order, and maps the last stage's output back to sensor units when it is in model units.
A bundle whose one model stage says ``"units": "sensor"`` has that mapping inside its graph; the
Privatizer then only checks the frame and lays it out as the graph takes it (``takes``).
"""
from pathlib import Path

import numpy as np

from sensorveil.runtime.backends import choose_backend, create_backend
from sensorveil.runtime.bundle import Bundle, open_bundle
from sensorveil.runtime.errors import InputError, OutputError
from sensorveil.runtime.schema import check_model_io, graphs_of
from sensorveil.runtime.self_test import run_self_test
from sensorveil.runtime.spec import (
    TensorSpec,
    check_sensor_input,
    from_graph_sensor_output,
    to_graph_sensor_input,
    to_model_units,
    to_sensor_units,
)
from sensorveil.runtime.stages import BANK_INDEX, MODEL_UNITS, SENSOR_UNITS, StageContext, stage_class

MAX_CHUNK = 1024   # samples per pipeline run: model-unit copies and backend buffers stay a few MB


class Privatizer:
    """A loaded bundle bound to one backend. Thread-compatible, not thread-safe."""

    def __init__(self, bundle: Bundle, backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
                 cpu_policy: str = "dedicated", scene_still=None, **backend_options):
        self.bundle = bundle
        self.scene_still = checked_scene_still(bundle.camera, scene_still)
        self.input_spec = TensorSpec.from_manifest(bundle.manifest["input"])
        self.output_spec = TensorSpec.from_manifest(bundle.manifest["output"])
        self.kind = bundle.manifest["mechanism"].get("kind", "perturbation")
        # the backend and why it was chosen (backend='auto' names what it passed over): reports print both
        self.backend_name, self.backend_why = choose_backend(bundle, backend)
        self.backend_options = dict(backend_options, cpu_policy=cpu_policy)   # as given (e.g. threads), for reports
        # one adapter per graph; a one-model bundle has one graph, "model"
        self.graphs = {name: create_backend(bundle, self.backend_name, graph=name, **self.backend_options)
                       for name in bundle.graph_names(self.backend_name)}
        self.backend = next(iter(self.graphs.values()))
        self.check_graphs_against_manifest()
        context = StageContext(bundle, self.run_graph, output)
        self.stages = [stage_class(spec["kind"])(spec, context) for spec in bundle.pipeline]
        last = self.stages[-1]
        if output is not None and output not in last.output_modes:
            raise InputError(f"output={output!r} is not available for a {self.kind} bundle; expected one of "
                             f"{list(last.output_modes)} (index output exists only for substitution "
                             "mechanisms such as PASS)")
        self.output_mode = last.output_mode()
        # the whole call is one backend run when the pipeline is a single model (what streams time apart)
        self.single_model = len(self.stages) == 1 and self.stages[0].kind == "model"
        # Randomness comes from the OS unless the caller asks for a replayable seed (docs/design.md).
        self.rng = np.random.default_rng(seed)
        run_self_test(self)     # the recorded inputs still give the recorded output (self_test.py)

    @classmethod
    def load(cls, path: "str | Path", backend: str = "auto", seed: "int | None" = None, output: "str | None" = None,
             trusted_keys=None, min_serial: "int | None" = None, cpu_policy: str = "dedicated", scene_still=None,
             **backend_options) -> "Privatizer":
        """``trusted_keys``: public key files (``sensorveil keys generate`` writes signer.pub); with any key
        given here or in SENSORVEIL_TRUSTED_KEYS, an unsigned or wrongly signed bundle is refused.
        ``min_serial``: the lowest signed bundle serial this device accepts (SENSORVEIL_MIN_SERIAL may
        raise it); an older bundle, or one no trusted key vouches for, is refused (no rollback).
        ``cpu_policy``: "dedicated" (the libraries' defaults: fastest when nothing else runs) or "shared"
        (threads that sleep when idle, fewer of them: far less CPU per frame beside other processes;
        ``load_for_stream``'s default). What each backend sets: sensorveil.runtime.backends.cpu_policy.
        ``scene_still``: for a camera bundle that releases a scene (cut-out paste), the operator's picture of the
        empty place (uint8, the camera's size) where that scene starts instead of neutral grey."""
        return cls(open_bundle(path, trusted_keys=trusted_keys, min_serial=min_serial), backend=backend, seed=seed,
                   output=output, cpu_policy=cpu_policy, scene_still=scene_still, **backend_options)

    @property
    def manifest(self) -> dict:
        return self.bundle.manifest

    @property
    def camera(self):
        """The manifest's camera entry (``CameraSettings``, or None) as this backend runs it: where the loaded
        detector graph's entry carries its own ``score`` (a quantized graph's, matched at export to the fp32
        graph's people), that."""
        camera = self.bundle.camera
        if camera is None or camera.detector_graph not in self.graphs:
            return camera
        return camera.for_graph(self.bundle.graph_artifact(self.backend_name, camera.detector_graph))

    @property
    def signature(self) -> dict:
        """{"status": "trusted" | "signed" | "unsigned" | "not checked", "key_id", "detail"}: only "trusted"
        means a key this device was given vouches for the manifest (sensorveil.runtime.trust)."""
        return self.bundle.signature

    def check_graphs_against_manifest(self) -> None:
        """Each loaded model's inputs and outputs against the manifest, before any frame runs."""
        for graph, (expected_input, expected_output) in expected_graph_io(self.bundle, self.backend_name).items():
            adapter = self.graphs.get(graph)
            if adapter is None:
                continue
            inputs, outputs = adapter.io_signature()
            check_model_io(self.bundle.root, self.backend_name, graph, inputs, outputs, expected_input,
                           expected_output, check_names=self.backend_name not in ("litert", "edgetpu"))

    @property
    def emits(self) -> str:
        """What the last stage returns: model units, sensor units, a bank index or a representation."""
        return self.stages[-1].emits

    @property
    def takes(self) -> str:
        """What the first graph takes: "model" units (the Privatizer normalizes in numpy) or "sensor"
        units (the normalization is inside the graph; the frame goes in in the sensor's dtype)."""
        return self.stages[0].takes

    def __call__(self, x, known=None, keys=None) -> np.ndarray:
        """``known``: optional, one int per sample, what the device already knows about it (a camera
        tracker's walking direction, -1 where unknown); a conditioned bundle (``conditioned_on``) draws
        only among substitutes that share it. ``keys``: optional, one hashable per sample, who it is
        (a camera tracker's person id); a substitution bundle keeps one substitute per key across calls.
        Other bundles ignore both."""
        batch, single = check_sensor_input(x, self.input_spec)
        known = self.check_known(known, len(batch))
        keys = self.check_keys(keys, len(batch))
        if len(batch) > MAX_CHUNK:     # bounded memory: a huge batch goes through in chunks
            part = lambda values, i: None if values is None else values[i:i + MAX_CHUNK]  # noqa: E731
            return np.concatenate([self(batch[i:i + MAX_CHUNK], part(known, i), part(keys, i))
                                   for i in range(0, len(batch), MAX_CHUNK)])
        y = self.run_pipeline(self.graph_input(batch), known, keys)
        if self.emits == MODEL_UNITS:
            if y.size != len(batch) * int(np.prod(self.output_spec.sample_shape)):
                raise OutputError(f"the pipeline returned shape {y.shape}; expected {len(batch)} sample(s) of the "
                                  f"output shape {self.output_spec.sample_shape}, so nothing is released")
            y = to_sensor_units(y, self.output_spec)
        self.check_output(y)
        return y[0] if single else y

    def check_output(self, y: np.ndarray) -> None:
        """Fail closed on what is about to leave the device: finite, and inside the output's sensor range
        where it is a sensor reading; otherwise one OutputError and nothing is released."""
        if self.emits == BANK_INDEX:
            return
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            raise OutputError(f"the mechanism produced {int(np.count_nonzero(~np.isfinite(y)))} NaN/inf value(s); "
                              "expected finite output, so nothing is released")
        if self.emits != MODEL_UNITS and self.emits != SENSOR_UNITS or not y.size:
            return
        low, high = y.min(), y.max()
        if low < self.output_spec.low or high > self.output_spec.high:
            raise OutputError(f"the mechanism produced values {low}..{high}; expected the output's sensor range "
                              f"[{self.output_spec.low}, {self.output_spec.high}], so nothing is released")

    def graph_input(self, batch: np.ndarray) -> np.ndarray:
        """A checked batch in sensor units -> what the first stage takes (model units, or the sensor's
        dtype in the model's layout when the graph normalizes itself)."""
        if self.takes == SENSOR_UNITS:
            return to_graph_sensor_input(batch, self.input_spec)
        return to_model_units(batch, self.input_spec)

    def sensor_output(self, model_output: np.ndarray) -> np.ndarray:
        """A one-model bundle's raw graph output (``run_model``) -> the privatized batch in sensor units:
        what a stream does between timing the backend and handing the frame on."""
        if self.takes == SENSOR_UNITS:
            y = from_graph_sensor_output(model_output, self.output_spec)
        else:
            y = to_sensor_units(model_output, self.output_spec)
        self.check_output(y)
        return y

    @property
    def conditioned_on(self) -> "str | None":
        """The attribute whose known value restricts the draw (manifest ``condition``), or None."""
        return self.stages[-1].conditioned_on()

    @staticmethod
    def check_known(known, batch_size: int) -> "np.ndarray | None":
        if known is None:
            return None
        values = np.asarray(known)
        if values.ndim == 0:
            values = values.reshape(1)
        if values.shape != (batch_size,) or values.dtype.kind not in "iub":
            raise InputError("known of {} {}; expected one integer per sample ({} values, -1 where "
                             "unknown)".format(values.dtype, values.shape, batch_size))
        return values.astype(np.int64)

    @staticmethod
    def check_keys(keys, batch_size: int) -> "list | None":
        if keys is None:
            return None
        keys = [keys] if np.ndim(keys) == 0 else list(keys)
        if len(keys) != batch_size:
            raise InputError("keys holds {} values for a batch of {}; expected one per sample".format(
                len(keys), batch_size))
        return keys

    def run_pipeline(self, model_batch: np.ndarray, known=None, keys=None) -> np.ndarray:
        """Every stage in order, from a batch in model units."""
        drawn_rows = self.rows_drawn(keys, known)
        if drawn_rows is not None:
            return self.run_for_draws(model_batch, known, keys, drawn_rows)
        for stage in self.stages:
            model_batch = stage.apply(model_batch, self.rng, known, keys)
        return model_batch

    def rows_drawn(self, keys, known) -> "np.ndarray | None":
        """For a substitution bundle called with keys (a camera's tracked people), the rows whose model output
        its draw uses: a held person's draw is thrown away, so the graphs before it need not run on their crop
        (most of a camera frame's model time). None where every row goes through every stage: no keys, or a
        stage before the draw that is not a graph row by row."""
        if keys is None or any(s.kind != "model" for s in self.stages[:-1]):
            return None
        return self.stages[-1].needs_draw(keys, known)

    def run_for_draws(self, model_batch: np.ndarray, known, keys, drawn_rows: np.ndarray) -> np.ndarray:
        """The graphs on the ``drawn_rows`` alone, then the draw for every row (held people keep theirs)."""
        scores = None
        if drawn_rows.any():
            scores = model_batch[drawn_rows]
            for stage in self.stages[:-1]:
                scores = stage(scores, self.rng)
        return self.stages[-1](scores, self.rng, known, keys, drawn_rows=drawn_rows)

    def run_graph(self, graph: str, batch: np.ndarray) -> np.ndarray:
        """One of the bundle's graphs on the backend, nothing else."""
        return self.graphs[graph].run(batch)

    def run_model(self, model_batch: np.ndarray) -> np.ndarray:
        """The backend alone on the bundle's first graph, on what ``graph_input`` returns: what benchmarks
        compare the full call against (for a one-model bundle, the whole model)."""
        return self.backend.run(model_batch)

    def bytes_per_frame(self) -> dict:
        """Bytes that leave the device per privatized frame, for each output mode this bundle serves."""
        spec = self.output_spec
        sample_bytes = int(np.prod(spec.sample_shape)) * spec.dtype.itemsize
        return self.stages[-1].bytes_per_frame(sample_bytes) or {"sample": sample_bytes}

    def describe(self) -> dict:
        described = {"bundle": str(self.bundle.root), "mechanism": self.manifest["mechanism"].get("name"),
                     "pipeline": [stage.kind for stage in self.stages], "signature": self.signature["status"],
                     **self.backend.describe()}
        for stage in self.stages:
            described.update(stage.describe())
        return described

    def __repr__(self) -> str:
        return (f"Privatizer({self.manifest['mechanism'].get('name')!r}, backend={self.backend_name!r}, "
                f"input={self.input_spec.sample_shape} {self.input_spec.dtype.name})")


def expected_graph_io(bundle: Bundle, backend: str) -> dict:
    """{graph: (input, output)} that the manifest promises, each (name or None, per-sample shape) or None
    where the manifest says nothing (an intermediate graph's latent, a classifier's scores)."""
    manifest, stages = bundle.manifest, bundle.pipeline
    expected = {}

    def expect(graph, side, value):
        entry = list(expected.get(graph, (None, None)))
        entry[side] = value
        expected[graph] = tuple(entry)
    for graph, entry in graphs_of(manifest["artifacts"][backend]).items():
        if entry.get("input_shape"):      # a graph's own input (a decoder's latent), where the manifest states it
            expect(graph, 0, (None, list(entry["input_shape"])))
    if "graph" in stages[0]:     # a model or attriguard stage first: it takes the bundle's input
        expect(stages[0]["graph"], 0, (manifest["input"]["name"], manifest["input"]["model_shape"][1:]))
    if stages[-1]["kind"] == "model":
        expect(stages[-1]["graph"], 1, (manifest["output"]["name"], manifest["output"]["model_shape"][1:]))
    for before, stage in zip(stages, stages[1:]):
        if stage["kind"] == "substitution" and before["kind"] == "model":   # P(X'|X) over the bank
            expect(before["graph"], 1, (None, [stage["bank_size"]]))
    return expected


def checked_scene_still(camera, still):
    """``still`` for a bundle that releases a quiet scene (``camera``: its CameraSettings, cut-out paste), else
    one InputError: on any other bundle it would change nothing, and a setting that silently does nothing reads
    as protection."""
    if still is None:
        return None
    if camera is None or not camera.cuts_out:
        raise InputError("scene_still applies to camera bundles that release a scene (camera paste 'cut-out'); "
                         "this bundle's camera paste is {!r}".format(None if camera is None else camera.paste))
    still = np.asarray(still)
    if still.dtype != np.uint8 or still.ndim not in (2, 3):
        raise InputError("scene_still of {} {}; expected uint8 HxW or HxWx3 like the camera's frames".format(
            still.dtype, still.shape))
    return still.copy()   # the caller's array may change later; the released scene must not change with it
