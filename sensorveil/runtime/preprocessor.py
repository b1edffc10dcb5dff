"""The one interface every pre-processor declares: how a stream turns a sensor frame into bundle samples
and the privatized samples back into a frame. An ABC rather than a typing.Protocol because the runtime
runs on Python 3.6 (Jetson Nano), which has no Protocol.

Implementations: Passthrough, DepthPersonPatch, FitToBundle (sensorveil.runtime.preprocess) and
PersonCrops (sensorveil.runtime.camera.pipeline).
"""
import abc
from collections import OrderedDict

import numpy as np

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
