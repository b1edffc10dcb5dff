"""The one interface every pre-processor declares: how a stream turns a sensor frame into bundle samples
and the privatized samples back into a frame. An ABC rather than a typing.Protocol because the runtime
runs on Python 3.6 (Jetson Nano), which has no Protocol.

Implementations: Passthrough, DepthPersonPatch, FitToBundle (sensorveil.runtime.preprocess) and
PersonCrops (sensorveil.runtime.camera.pipeline).

A bundle may declare its own pre-processor in a top-level manifest entry (a camera bundle's ``camera``):
``DECLARED_KINDS`` maps that entry's key to the ``Declared`` class that parses and checks it once at load and
builds the pre-processor, as ``STAGE_KINDS`` maps pipeline stages. Its module is imported only when a bundle
declares it, so the runtime's core names no kind of its own.
"""
import abc
import importlib
from collections import OrderedDict

import numpy as np

from sensorveil.runtime.errors import InputError

# manifest entry -> the module and Declared class that read it (a new kind of frame is one module and one line)
DECLARED_KINDS = {
    "camera": ("sensorveil.runtime.camera.settings", "CameraSettings"),
}

MAX_PREPROCESSORS = 8   # kinds of frame whose pre-processors a stream keeps (least recently used goes first)


class Preprocessor(abc.ABC):
    """Subclasses set ``name`` and implement ``prepare`` and ``restore``; ``known`` and ``keys`` have
    defaults for a pre-processor that knows nothing of its samples."""

    name = ""          # counted per frame in a stream's report
    batched = False    # True: prepare() returns a batch of samples (one per person, maybe none)

    @abc.abstractmethod
    def prepare(self, frame) -> tuple:
        """A sensor frame -> (the samples the bundle takes: a numpy sample, or a batch where ``batched``,
        the context restore() needs)."""

    @abc.abstractmethod
    def restore(self, privatized, context):
        """The privatized samples and their context -> the frame to release (a source's frame type)."""

    def known(self, context) -> "np.ndarray | None":
        """What the pre-processor knows of each sample (one int per sample, a conditioned bundle's input),
        or None: the default."""
        return None

    def keys(self, context) -> "list | None":
        """Who each sample is (one hashable per sample, a substitution bundle's key), or None: the default."""
        return None


class Declared(abc.ABC):
    """A manifest entry that declares how the bundle's frames become its samples, parsed and checked once at
    load (``from_manifest``); ``make`` builds its pre-processor for a stream. ``OPTIONS``: the keyword options
    a caller may give it (name -> what takes it, for the error where a bundle has no such pre-processor)."""

    OPTIONS = {}
    prepares_ahead = True   # False: frames must be prepared one at a time (a background model follows them)

    @classmethod
    @abc.abstractmethod
    def from_manifest(cls, manifest, where):
        """The parsed entry, or None where the manifest has none; one ManifestError names a bad field."""

    @abc.abstractmethod
    def takes(self, frame) -> bool:
        """Whether frames like ``frame`` go through this pre-processor (others take the generic ones)."""

    @abc.abstractmethod
    def make(self, run_graph, **options):
        """The pre-processor for one stream; ``run_graph(graph, batch)``: the loaded bundle's graph runner."""

    def for_graphs(self, bundle, backend):
        """These settings as the backend's loaded graphs run them: the default, unchanged."""
        return self

    def stream_output(self, manifest):
        """The Privatizer output mode a stream asks for by default, or None: the bundle's own default."""
        return None

    def check_options(self, options):
        """The options a caller gave (``OPTIONS`` names, None where not given), checked: the default keeps them."""
        return options


def declared_class(kind):
    module, name = DECLARED_KINDS[kind]
    return getattr(importlib.import_module(module), name)


def declared_in(manifest, where):
    """The pre-processor a manifest declares, parsed and checked (a ``Declared``), or None."""
    for kind in DECLARED_KINDS:
        if kind in manifest:
            return declared_class(kind).from_manifest(manifest, where)
    return None


def split_declared_options(options):
    """(the options a declared pre-processor takes, the rest) of a caller's keyword options."""
    names = {name for kind in DECLARED_KINDS for name in declared_class(kind).OPTIONS}
    return ({name: value for name, value in options.items() if name in names},
            {name: value for name, value in options.items() if name not in names})


def check_declared_options(declared, options):
    """``options`` for the bundle's declared pre-processor. One given to a bundle whose pre-processor does not
    take it is refused: it would change nothing, and a setting that silently does nothing reads as protection."""
    given = {name: value for name, value in options.items() if value is not None}
    if declared is not None:
        return declared.check_options(given)
    for name in given:
        takers = [declared_class(kind).OPTIONS[name] for kind in DECLARED_KINDS
                  if name in declared_class(kind).OPTIONS]
        raise InputError("{} applies to {}; this bundle declares no such pre-processor".format(
            name, " or ".join(takers) or "no bundle this runtime knows"))
    return {}


def name_of(preprocessor) -> "str | None":
    """What a report calls the pre-processor in use: its name, or None before a frame chose one."""
    return None if preprocessor is None else preprocessor.name


def check_preprocessor(preprocessor) -> None:
    """A caller's own pre-processor must declare the interface, or a stream would fail on its first frame."""
    if not isinstance(preprocessor, Preprocessor):
        raise TypeError(f"preprocessor: got {type(preprocessor).__name__}; expected a subclass of "
                        "sensorveil.runtime.preprocessor.Preprocessor (prepare and restore)")


class PreprocessorCache(OrderedDict):
    """A stream's pre-processors by kind of frame, bounded by construction: a source whose frame size changes
    every frame (hostile or broken) would otherwise grow one pre-processor (and its buffers) per size for ever.
    The least recently used goes first; it is made again from scratch when its kind returns, as at the stream's
    start (a camera pipeline's scene starts over)."""

    def __init__(self, limit=MAX_PREPROCESSORS):
        super().__init__()
        self.limit = limit

    def get_or_make(self, kind, make):
        if kind not in self:
            self[kind] = make()
            while len(self) > self.limit:
                self.popitem(last=False)
        self.move_to_end(kind)
        return self[kind]
