"""The one interface every backend adapter declares (MMDeploy-style: small wrappers behind one base).

An adapter takes the normalized float32 batch the model expects and returns the model's raw output;
everything about sensor units lives in the Privatizer. An ABC rather than a typing.Protocol because the
runtime runs on Python 3.6 (Jetson Nano), which has no Protocol.
"""
import abc

import numpy as np


class Backend(abc.ABC):
    """A loaded model of one bundle graph on one backend library."""
    name = ""   # the backend's registry name: onnxruntime, litert, edgetpu, openvino, tensorrt

    @abc.abstractmethod
    def run(self, batch: np.ndarray) -> np.ndarray:
        """The float32 batch the model expects -> the model's raw output."""

    @abc.abstractmethod
    def io_signature(self) -> tuple:
        """((input name, shape, dtype), ...), ((output name, shape, dtype), ...) as the library loaded them,
        checked against the manifest before any frame runs."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """What ran: the library's version, device, threads and the graph file, for reports."""
