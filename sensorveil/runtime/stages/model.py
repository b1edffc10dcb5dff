"""The stage that runs one of the bundle's graphs on the chosen backend."""
from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.manifest_fields import fail, need_text, optional, pipeline_of
from sensorveil.runtime.spec import TensorSpec, from_graph_sensor_output
from sensorveil.runtime.stages.base import (
    GRAPH_UNITS,
    MODEL_UNITS,
    REPRESENTATION,
    SENSOR_UNITS,
    Stage,
    validate_graph_name,
)


class ModelStage(Stage):
    """``{"kind": "model", "graph": NAME}``: the batch goes through graph NAME (model units in and out).
    ``"emits": "representation"`` marks a graph whose output is a feature vector, not model units of the
    sensor (TAPPFL), so the Privatizer returns it as is instead of mapping it back to sensor units.
    ``"units": "sensor"`` marks a graph with the manifest's normalization inside it (the bundle's only
    stage): it takes the frame in the sensor's dtype and returns the privatized frame in sensor units,
    so the Privatizer skips its numpy mapping on both sides."""

    kind = "model"
    emits = MODEL_UNITS

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        validate_graph_name(where, path + ".graph", stage.get("graph"), manifest)
        optional(stage, "units", need_text, where, path + ".units", stage.get("units"), GRAPH_UNITS)
        optional(stage, "emits", need_text, where, path + ".emits", stage.get("emits"), (MODEL_UNITS, REPRESENTATION))
        if stage.get("units") == SENSOR_UNITS:
            validate_sensor_units_stage(where, path, stage, manifest)

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.graph = self.require("graph")
        self.run = context.graph(self.graph)
        self.emits = spec.get("emits", MODEL_UNITS)
        if self.emits not in (MODEL_UNITS, REPRESENTATION):
            raise BundleError("{}: model stage emits {!r}; expected {!r} or {!r}".format(
                context.bundle.root, self.emits, MODEL_UNITS, REPRESENTATION))
        units = spec.get("units", MODEL_UNITS)
        if units not in GRAPH_UNITS:
            raise BundleError("{}: model stage units {!r}; expected one of {}".format(
                context.bundle.root, units, list(GRAPH_UNITS)))
        if units == SENSOR_UNITS:
            self.takes = self.emits = SENSOR_UNITS
            self.output_spec = TensorSpec.from_manifest(context.bundle.manifest["output"])

    def __call__(self, batch, rng):
        if self.emits == SENSOR_UNITS:
            return from_graph_sensor_output(self.run(batch), self.output_spec)
        return self.run(batch)


class ModelEntry(object):
    """What the sdk writes for a model stage, read back by :class:`ModelStage`: the graph's name, and
    ``emits`` only for a graph whose output is not model units (TAPPFL's representation)."""

    def __init__(self, graph, emits=None):
        self.graph, self.emits = graph, emits

    def to_manifest(self):
        entry = {"kind": ModelStage.kind, "graph": self.graph}
        if self.emits is not None:
            entry["emits"] = self.emits
        return entry


def with_units(stage, units, note):
    """A one-model pipeline's stage as the exporter finishes it: which side maps the sensor units
    (``units``, read by :class:`ModelStage`), and why."""
    return dict(stage, units=units, units_note=note)


def validate_sensor_units_stage(where, path, stage, manifest):
    """A graph with the normalization inside takes the bundle's input and returns its output in sensor
    units, so it must be the whole pipeline, and its output must be a sensor reading (not TAPPFL's
    representation, which has no sensor units to map back to)."""
    if len(pipeline_of(manifest)) != 1:
        fail(where, path + ".units", stage["units"], "'model' (the default): only a one-stage pipeline's model "
             "can take and return sensor units; the other stages work in model units")
    if stage.get("emits") == REPRESENTATION:
        fail(where, path + ".units", stage["units"], "'model' (the default) for a stage that emits a "
             "representation, which is not in sensor units")
