"""ONNX Runtime adapter (CPU by default; any execution provider the caller names)."""
import numpy as np
import onnxruntime as ort

from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.onnx_scan import refuse_external_data

# onnxruntime's element type names where numpy spells them differently
NUMPY_NAMES = {"float": "float32", "double": "float64"}


def numpy_dtype(ort_type: str) -> np.dtype:
    """'tensor(uint16)' -> uint16, 'tensor(float)' -> float32."""
    name = ort_type[len("tensor("):-1]
    return np.dtype(NUMPY_NAMES.get(name, name))


def make_session(model, providers=None, threads: "int | None" = None) -> ort.InferenceSession:
    """One place that configures sessions, so the runtime and the raw-session benchmark match.
    ``model``: the model's bytes (the runtime passes the bytes it hashed) or a path (benchmarks)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=options,
                                providers=providers or ["CPUExecutionProvider"])


class OnnxRuntimeBackend:
    name = "onnxruntime"

    def __init__(self, bundle: Bundle, graph: str = "model", providers=None, threads: "int | None" = None):
        artifact = bundle.graph_artifact(self.name, graph)
        self.model_path = bundle.path(artifact["file"])
        # from the verified bytes, not the path: a model given as bytes also has no folder from which
        # onnxruntime could pick up unhashed external-data files
        model = bundle.read(artifact["file"])
        # bytes alone are not enough: onnxruntime resolves external data against the working directory
        refuse_external_data(model, bundle.root, artifact["file"])
        self.session = make_session(model, providers, threads)
        self.input_name = self.session.get_inputs()[0].name
        # float32 for a graph in model units; the sensor's dtype for one with the units inside it
        self.input_dtype = numpy_dtype(self.session.get_inputs()[0].type)
        self.output_names = [output.name for output in self.session.get_outputs()]

    def run(self, batch: np.ndarray) -> np.ndarray:
        batch = batch.astype(self.input_dtype, copy=False)    # no copy when it already is
        return self.session.run(self.output_names[:1], {self.input_name: batch})[0]

    def io_signature(self) -> tuple:
        """([(name, shape)] of the inputs, the same of the outputs); a free dimension is None."""
        return tuple([(port.name, tuple(dim if isinstance(dim, int) else None for dim in port.shape))
                      for port in ports] for ports in (self.session.get_inputs(), self.session.get_outputs()))

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": ort.__version__,
                "providers": self.session.get_providers(), "model": self.model_path.name}
