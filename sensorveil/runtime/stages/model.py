"""The stage that runs one of the bundle's graphs on the chosen backend."""
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage


class ModelStage(Stage):
    """``{"kind": "model", "graph": NAME}``: the batch goes through graph NAME (model units in and out)."""

    kind = "model"
    emits = MODEL_UNITS

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.graph = self.require("graph")
        self.run = context.graph(self.graph)

    def __call__(self, batch, rng):
        return self.run(batch)
