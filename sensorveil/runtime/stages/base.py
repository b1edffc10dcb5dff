"""What a pipeline stage is. A bundle's mechanism is a short list of stages (manifest ``pipeline``),
each a model the backend runs or a numpy step (PASS's draw, AttriGuard's noise, Sanitizer's latent
mechanism). The runtime builds each stage from its manifest entry and feeds it the previous stage's
output; the first stage gets the input batch in model units.

Runs on the boards' own Python (3.6 on Jetson Nano): no annotations import, no dataclasses here.
"""
import abc
import io

import numpy as np

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.manifest_fields import ManifestError, graphs_of, need_text

# What a stage's output is, so the Privatizer knows what is left to do after the last stage:
MODEL_UNITS = "model"            # model units: the Privatizer maps them back to sensor units
SENSOR_UNITS = "sensor"          # already in sensor units (e.g. a substitute sample from the bank)
BANK_INDEX = "index"             # a position in a bank the server holds (PASS index mode)
REPRESENTATION = "representation"  # a feature vector, not a sensor reading (TAPPFL)
EMITS = (MODEL_UNITS, SENSOR_UNITS, BANK_INDEX, REPRESENTATION)
# Which side maps sensor units to model units and back: the runtime in numpy ("model", the default and
# every bundle exported before the field existed) or the graph itself ("sensor"); a model stage's "units"
GRAPH_UNITS = (MODEL_UNITS, SENSOR_UNITS)


class StageContext(object):
    """What a stage may use: its bundle's verified arrays, the bundle's graphs run by the chosen
    backend, and the output mode the caller asked for (None: the stage's default)."""

    def __init__(self, bundle, run_graph, output=None):
        self.bundle = bundle
        self._run_graph = run_graph
        self.output = output

    def array(self, name):
        """A .npy file of the bundle, from the bytes whose sha256 was checked, without pickle."""
        try:
            return np.load(io.BytesIO(self.bundle.read(name)), allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise BundleError("{}: {} is not a plain .npy array ({})".format(self.bundle.root, name, error))

    def graph(self, name):
        """A callable running graph ``name`` on the backend: float32 batch in model units -> output."""
        return lambda batch: self._run_graph(name, batch)


class Stage(abc.ABC):
    """One step of the pipeline. Subclasses set ``kind`` (the manifest's name for it) and ``emits``, and
    implement ``__call__``; the optional abilities below have defaults that a plain numpy step keeps, so
    the Privatizer asks every stage the same questions instead of probing for attributes."""

    kind = None
    takes = MODEL_UNITS     # what the stage's input is: model units, or sensor units (a self-normalizing graph)
    emits = MODEL_UNITS
    # output modes a caller may choose with Privatizer.load(..., output=...); the first is the default
    output_modes = ("sample",)

    def __init__(self, spec, context):
        self.spec = spec
        self.context = context

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        """Check this kind's manifest entry ``stage`` (at ``path``, e.g. ``pipeline[1]``) before any file
        is read: its types and the ranges in which the stage still protects; one ManifestError naming
        the field. The default checks nothing: such a stage checks its keys with ``require``."""

    @abc.abstractmethod
    def __call__(self, batch, rng):
        """``batch``: the previous stage's output (a batch); ``rng``: the Privatizer's numpy Generator
        (OS entropy unless the caller passed a seed). Returns this stage's output batch."""

    def apply(self, batch, rng, known=None, keys=None):
        """The stage as the Privatizer calls it, with ``known`` (what the device knows of each sample, e.g.
        a tracker's walking direction) and ``keys`` (who each sample is, e.g. a tracker's person ids).
        A stage that uses neither ignores them: this default."""
        return self(batch, rng)

    def output_mode(self):
        """The output mode this loaded stage serves (one of ``output_modes``): the first by default."""
        return self.output_modes[0]

    def conditioned_on(self):
        """The attribute whose known value restricts the stage's draw, or None: the default."""
        return None

    def needs_draw(self, keys, known=None):
        """For a stage that holds a draw per key: bool per row of the next call with these ``keys``, the
        rows whose input it uses, so the graphs before it may skip the others. None (the default): every
        row's input is used."""
        return None

    def describe(self):
        """What this stage adds to ``Privatizer.describe()`` (e.g. who a bank's substitutes are); nothing by default."""
        return {}

    def bytes_per_frame(self, sample_bytes):
        """Bytes that leave the device per frame in each output mode; None: one sample's bytes."""
        return None

    def require(self, key):
        """A key of this stage's manifest entry, or one BundleError that names it."""
        if key not in self.spec:
            raise BundleError("{}: pipeline stage {!r} lacks {!r}".format(self.context.bundle.root, self.kind, key))
        return self.spec[key]


def validate_graph_name(where, path, graph, manifest):
    """A graph a stage runs must be carried by every backend's artifact."""
    need_text(where, path, graph)
    for backend, artifact in manifest["artifacts"].items():
        if graph not in graphs_of(artifact):
            raise ManifestError("{}: {} runs graph {!r}, which the {!r} artifact does not carry".format(
                where, path.rsplit(".", 1)[0], graph, backend))
