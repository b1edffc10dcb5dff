"""The one interface every pre-processor declares: how a stream turns a sensor frame into bundle samples
and the privatized samples back into a frame. An ABC rather than a typing.Protocol because the runtime
runs on Python 3.6 (Jetson Nano), which has no Protocol.

Implementations: Passthrough, DepthPersonPatch, FitToBundle (sensorveil.runtime.preprocess) and
PersonCrops (sensorveil.runtime.camera.pipeline).
"""
import abc


class Preprocessor(abc.ABC):
    name = ""          # counted per frame in a stream's report
    batched = False    # True: prepare() returns a batch of samples (one per person, maybe none)

    @abc.abstractmethod
    def prepare(self, frame):
        """A sensor frame -> (the samples the bundle takes, the context restore() needs)."""

    @abc.abstractmethod
    def restore(self, privatized, context):
        """The privatized samples and their context -> the frame to release."""

    def known(self, context):
        """What the pre-processor knows of each sample (a conditioned bundle's input), or None."""
        return None

    def keys(self, context):
        """Who each sample is (a substitution bundle's key), or None."""
        return None


def check_preprocessor(preprocessor) -> None:
    """A caller's own pre-processor must declare the interface, or a stream would fail on its first frame."""
    if not isinstance(preprocessor, Preprocessor):
        raise TypeError(f"preprocessor: got {type(preprocessor).__name__}; expected a subclass of "
                        "sensorveil.runtime.preprocessor.Preprocessor (prepare and restore)")
