"""The stage that runs one of the bundle's graphs on the chosen backend."""
from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.stages.base import MODEL_UNITS, REPRESENTATION, Stage


class ModelStage(Stage):
    """``{"kind": "model", "graph": NAME}``: the batch goes through graph NAME (model units in and out).
    ``"emits": "representation"`` marks a graph whose output is a feature vector, not model units of the
    sensor (TAPPFL), so the Privatizer returns it as is instead of mapping it back to sensor units."""

    kind = "model"
    emits = MODEL_UNITS

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.graph = self.require("graph")
        self.run = context.graph(self.graph)
        self.emits = spec.get("emits", MODEL_UNITS)
        if self.emits not in (MODEL_UNITS, REPRESENTATION):
            raise BundleError("{}: model stage emits {!r}; expected {!r} or {!r}".format(
                context.bundle.root, self.emits, MODEL_UNITS, REPRESENTATION))

    def __call__(self, batch, rng):
        return self.run(batch)
