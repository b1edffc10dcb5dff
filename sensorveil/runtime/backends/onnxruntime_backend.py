"""ONNX Runtime adapter (CPU by default; any execution provider the caller names)."""
import numpy as np
import onnxruntime as ort

from sensorveil.runtime.backends.base import Backend, IOSignature, io_signature_of
from sensorveil.runtime.backends.cpu_policy import DEFAULT_POLICY, SHARED, check_cpu_policy, policy_threads
from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.onnx_scan import refuse_external_data

# onnxruntime's element type names where numpy spells them differently
NUMPY_NAMES = {"float": "float32", "double": "float64"}
# what cpu_policy="shared" adds: worker threads that sleep instead of spinning between runs
NO_SPINNING = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}


def numpy_dtype(ort_type: str) -> np.dtype:
    """'tensor(uint16)' -> uint16, 'tensor(float)' -> float32."""
    name = ort_type[len("tensor("):-1]
    return np.dtype(NUMPY_NAMES.get(name, name))


def session_options(threads: "int | None" = None, cpu_policy: str = DEFAULT_POLICY) -> ort.SessionOptions:
    """The SessionOptions for a policy (sensorveil.runtime.backends.cpu_policy)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    threads = policy_threads(check_cpu_policy(cpu_policy), threads)
    if threads:
        options.intra_op_num_threads = threads
    # config entries exist in every onnxruntime the boards run (1.10 has both keys); the guard keeps a
    # stripped build without the method loading with its defaults rather than failing
    if cpu_policy == SHARED and hasattr(options, "add_session_config_entry"):
        for key, value in NO_SPINNING.items():
            options.add_session_config_entry(key, value)
    return options


def make_session(model, providers=None, threads: "int | None" = None,
                 cpu_policy: str = DEFAULT_POLICY) -> ort.InferenceSession:
    """One place that configures sessions, so the runtime and the raw-session benchmark match.
    ``model``: the model's bytes (the runtime passes the bytes it hashed) or a path (benchmarks)."""
    options = session_options(threads, cpu_policy)
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=options,
                                providers=providers or ["CPUExecutionProvider"])


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def __init__(self, bundle: Bundle, graph: str = "model", providers=None, threads: "int | None" = None,
                 cpu_policy: str = DEFAULT_POLICY):
        artifact = bundle.graph_artifact(self.name, graph)
        self.model_path = bundle.path(artifact["file"])
        # from the verified bytes, not the path: a model given as bytes also has no folder from which
        # onnxruntime could pick up unhashed external-data files
        model = bundle.read(artifact["file"])
        # bytes alone are not enough: onnxruntime resolves external data against the working directory
        refuse_external_data(model, bundle.root, artifact["file"])
        self.cpu_policy = cpu_policy
        self.session = make_session(model, providers, threads, cpu_policy)
        self.options = self.session.get_session_options()
        self.input_name = self.session.get_inputs()[0].name
        # float32 for a graph in model units; the sensor's dtype for one with the units inside it
        self.input_dtype = numpy_dtype(self.session.get_inputs()[0].type)
        self.output_names = [output.name for output in self.session.get_outputs()]

    def run(self, batch: np.ndarray) -> np.ndarray:
        batch = batch.astype(self.input_dtype, copy=False)    # no copy when it already is
        return self.session.run(self.output_names[:1], {self.input_name: batch})[0]

    def io_signature(self) -> IOSignature:
        """The inputs' and outputs' names and shapes; a free dimension is None."""
        def ports(ports):
            return [(port.name, [dim if isinstance(dim, int) else None for dim in port.shape]) for port in ports]
        return io_signature_of(ports(self.session.get_inputs()), ports(self.session.get_outputs()))

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": ort.__version__,
                "providers": self.session.get_providers(), "model": self.model_path.name,
                "cpu_policy": self.cpu_policy, "threads": self.options.intra_op_num_threads or "default",
                "spinning": self.cpu_policy != SHARED}
