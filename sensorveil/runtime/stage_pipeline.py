"""A loaded bundle's internals: its graphs on one backend, its stages and the pre-processor it declares.

``Privatizer`` is what an application holds (load, call, specs, description); a ``StagePipeline`` is what the
runtime's own stream, benchmarks and tools drive through ``Privatizer.pipeline``: the graphs one by one, the
first graph alone on a batch already in its units (what a stream times apart as inference), the unit mapping
around it, and the frame pre-processor the manifest declares (``make_preprocessor``). A substitution bundle
called with keys runs its graphs only on the rows whose draw is used (``rows_drawn``).
"""
import numpy as np

from sensorveil.runtime.backends import create_backend
from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.errors import InputError, OutputError
from sensorveil.runtime.preprocess import make_preprocessor
from sensorveil.runtime.preprocessor import check_declared_options
from sensorveil.runtime.schema import check_model_io, graphs_of
from sensorveil.runtime.spec import from_graph_sensor_output, to_graph_sensor_input, to_model_units, to_sensor_units
from sensorveil.runtime.stages import BANK_INDEX, MODEL_UNITS, SENSOR_UNITS, StageContext, stage_class


class StagePipeline(object):
    """The bundle's stages over its graphs on ``backend_name``, with the specs they map units by.
    ``preprocessor_options``: the caller's options for the declared pre-processor (a camera's scene_still)."""

    def __init__(self, bundle, backend_name, input_spec, output_spec, output=None, seed=None,
                 preprocessor_options=None, **backend_options):
        self.bundle, self.backend_name = bundle, backend_name
        self.input_spec, self.output_spec = input_spec, output_spec
        # one adapter per graph; a one-model bundle has one graph, "model"
        self.graphs = {name: create_backend(bundle, backend_name, graph=name, **backend_options)
                       for name in bundle.graph_names(backend_name)}
        self.backend = next(iter(self.graphs.values()))
        self.check_graphs_against_manifest()
        context = StageContext(bundle, self.run_graph, output)
        self.stages = [stage_class(spec["kind"])(spec, context) for spec in bundle.pipeline]
        # the whole call is one backend run when the pipeline is a single model (what streams time apart)
        self.single_model = len(self.stages) == 1 and self.stages[0].kind == "model"
        # Randomness comes from the OS unless the caller asks for a replayable seed (docs/design.md).
        self.rng = np.random.default_rng(seed)
        # the declared pre-processor's settings as these graphs run them (a quantized detector's own threshold)
        self.declared = None if bundle.declared is None else bundle.declared.for_graphs(bundle, backend_name)
        self.preprocessor_options = check_declared_options(self.declared, preprocessor_options or {})

    def make_preprocessor(self, frame, depth_output="patch"):
        """The pre-processor for frames like ``frame``: the declared one where it takes them, else the generic."""
        return make_preprocessor(frame, self.input_spec, depth_output, self.declared, self.run_graph,
                                 self.preprocessor_options)

    @property
    def prepares_ahead(self):
        """Whether a stream may prepare frames ahead in another thread (not where the declared pre-processor
        follows frames one at a time, as a camera's background model does)."""
        return self.declared is None or self.declared.prepares_ahead

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

    def run_checked(self, batch, known=None, keys=None):
        """A checked batch in sensor units (at most MAX_CHUNK samples) -> the released batch, checked."""
        y = self.run_pipeline(self.graph_input(batch), known, keys)
        if self.emits == MODEL_UNITS:
            if y.size != len(batch) * int(np.prod(self.output_spec.sample_shape)):
                raise OutputError("the pipeline returned shape {}; expected {} sample(s) of the output shape {}, so "
                                  "nothing is released".format(y.shape, len(batch), self.output_spec.sample_shape))
            y = to_sensor_units(y, self.output_spec)
        self.check_output(y)
        return y

    def describe(self):
        described = {"pipeline": [stage.kind for stage in self.stages], **self.backend.describe()}
        for stage in self.stages:
            described.update(stage.describe())
        return described


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


