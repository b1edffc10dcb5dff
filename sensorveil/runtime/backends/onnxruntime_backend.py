"""ONNX Runtime adapter (CPU by default; any execution provider the caller names)."""
import numpy as np
import onnxruntime as ort

from sensorveil.runtime.bundle import Bundle


def make_session(model_path, providers=None, threads: "int | None" = None) -> ort.InferenceSession:
    """One place that configures sessions, so the runtime and the raw-session benchmark match."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(model_path), sess_options=options,
                                providers=providers or ["CPUExecutionProvider"])


class OnnxRuntimeBackend:
    name = "onnxruntime"

    def __init__(self, bundle: Bundle, graph: str = "model", providers=None, threads: "int | None" = None):
        artifact = bundle.graph_artifact(self.name, graph)
        self.model_path = bundle.path(artifact["file"])
        self.session = make_session(self.model_path, providers, threads)
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [output.name for output in self.session.get_outputs()]

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(self.output_names[:1], {self.input_name: batch})[0]

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": ort.__version__,
                "providers": self.session.get_providers(), "model": self.model_path.name}
