"""LiteRT adapter (ai-edge-litert, falling back to tflite_runtime on boards that only have it).

TFLite models from the exporter have a static batch of 1 (the Edge TPU requires it), so a
batch runs sample by sample. Int8 models take and return int8: the adapter quantizes the
float32 model-unit input with the input tensor's (scale, zero point) and dequantizes the
output, so callers see the same float32 interface as every other backend. A model with the
sensor units inside it (no quantization parameters) takes an integer sensor dtype as is.
"""
import numpy as np

try:
    from ai_edge_litert import interpreter as litert
    LIBRARY = "ai-edge-litert"
except ImportError:  # Coral boards often ship only the older runtime
    from tflite_runtime import interpreter as litert
    LIBRARY = "tflite-runtime"

from sensorveil.runtime.backends.base import Backend, IOSignature, io_signature_of
from sensorveil.runtime.backends.cpu_policy import DEFAULT_POLICY, check_cpu_policy, policy_threads
from sensorveil.runtime.bundle import Bundle


def quantize(values: np.ndarray, detail: dict) -> np.ndarray:
    """float -> the tensor's integer type with its affine (scale, zero point)."""
    scale, zero_point = detail["quantization"]
    info = np.iinfo(detail["dtype"])
    return np.clip(np.rint(values / scale + zero_point), info.min, info.max).astype(detail["dtype"])


def dequantize(values: np.ndarray, detail: dict) -> np.ndarray:
    scale, zero_point = detail["quantization"]
    return ((values.astype(np.float32) - zero_point) * scale).astype(np.float32)


class LiteRTBackend(Backend):
    name = "litert"

    def __init__(self, bundle: Bundle, graph: str = "model", threads: "int | None" = None,
                 cpu_policy: str = DEFAULT_POLICY):
        artifact = bundle.graph_artifact(self.name, graph)
        # LiteRT's pool has no spinning switch: "shared" sizes it (num_threads, in every tflite-runtime)
        self.cpu_policy = check_cpu_policy(cpu_policy)
        self.threads = policy_threads(cpu_policy, threads)
        self.model_path = bundle.path(artifact["file"])
        self.model_content = bundle.read(artifact["file"])     # the verified bytes, never a second open
        self.precision = artifact.get("precision", "fp32")
        self.interpreter = self._make_interpreter(self.threads)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.output = self.interpreter.get_output_details()[0]
        # int8 I/O with a scale: a quantized model; an integer input without one takes sensor readings
        self.quantized_io = np.issubdtype(self.input["dtype"], np.integer) and self.input["quantization"][0] != 0

    def _make_interpreter(self, threads):
        return litert.Interpreter(model_content=self.model_content, num_threads=threads)

    def run(self, batch: np.ndarray) -> np.ndarray:
        return np.concatenate([self._run_one(batch[i:i + 1]) for i in range(len(batch))])

    def _run_one(self, sample: np.ndarray) -> np.ndarray:
        x = quantize(sample, self.input) if self.quantized_io else sample.astype(self.input["dtype"], copy=False)
        self.interpreter.set_tensor(self.input["index"], x.reshape(self.input["shape"]))
        self.interpreter.invoke()
        y = self.interpreter.get_tensor(self.output["index"])
        return dequantize(y, self.output) if self.output["quantization"][0] != 0 else y.copy()

    def io_signature(self) -> IOSignature:
        """The inputs' and outputs' names and shapes; a free dimension (-1 in the shape signature) is None.
        The converter names tensors itself, so names say nothing here."""
        def ports(details):
            return [(detail["name"], tuple(None if dim < 0 else int(dim)
                                           for dim in detail.get("shape_signature", detail["shape"])))
                    for detail in details]
        interpreter = self.interpreter
        return io_signature_of(ports(interpreter.get_input_details()), ports(interpreter.get_output_details()))

    def describe(self) -> dict:
        return {"backend": self.name, "library": LIBRARY, "precision": self.precision,
                "io_dtype": np.dtype(self.input["dtype"]).name, "model": self.model_path.name,
                "cpu_policy": self.cpu_policy, "threads": self.threads or "default"}
