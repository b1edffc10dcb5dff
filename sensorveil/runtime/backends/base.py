"""The one interface every backend adapter declares (MMDeploy-style: small wrappers behind one base).

An adapter takes the normalized float32 batch the model expects and returns the model's raw output;
everything about sensor units lives in the Privatizer. An ABC rather than a typing.Protocol because the
runtime runs on Python 3.6 (Jetson Nano), which has no Protocol.
"""
import abc
from collections import namedtuple

import numpy as np

# One input or output of a loaded model: its name as the library reports it, and its shape with None for a
# free dimension (the batch). No dtype: the adapter casts the float32 batch to what the model takes itself,
# and the manifest's check is of names and shapes.
Port = namedtuple("Port", ["name", "shape"])
# What io_signature returns: the model's inputs and outputs, each a list of Port.
IOSignature = namedtuple("IOSignature", ["inputs", "outputs"])


def io_signature_of(inputs, outputs):
    """An adapter's IOSignature from (name, shape) pairs of its inputs and its outputs."""
    return IOSignature([Port(name, tuple(shape)) for name, shape in inputs],
                       [Port(name, tuple(shape)) for name, shape in outputs])


class Backend(abc.ABC):
    """A loaded model of one bundle graph on one backend library."""
    name = ""   # the backend's registry name: onnxruntime, litert, edgetpu, openvino, tensorrt

    @abc.abstractmethod
    def run(self, batch: np.ndarray) -> np.ndarray:
        """The float32 batch the model expects -> the model's raw output."""

    @abc.abstractmethod
    def io_signature(self) -> IOSignature:
        """The model's inputs and outputs (Port: name, shape) as the library loaded them, checked against
        the manifest before any frame runs."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """What ran: the library's version, device, threads and the graph file, for reports."""
