"""OpenVINO adapter: the IR on MYRIAD (Neural Compute Stick 2) when one is plugged in, else CPU.

Which device ran the model is part of ``describe()``, so a benchmark or log always says
whether the stick was used. Asking for device='MYRIAD' explicitly on a machine without a
stick is an error, never a quiet switch to the CPU.
"""
import numpy as np

try:
    from openvino import Core, get_version  # OpenVINO 2023.1 and newer (2026 has nothing else)
except ImportError:   # 2022.3, the last release with MYRIAD: `openvino` is a bare namespace package there
    from openvino.runtime import Core, get_version

from sensorveil.runtime.backends.base import Backend, IOSignature, io_signature_of
from sensorveil.runtime.backends.cpu_policy import DEFAULT_POLICY, SHARED, check_cpu_policy, policy_threads
from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.errors import BackendUnavailableError

PREFERRED_DEVICES = ("MYRIAD", "CPU")
# cpu_policy="shared" on the CPU: one stream answering one request at a time with a few threads, none of
# them pinned to a core another process may need. Values as strings: 2022.3's compile_model takes
# str -> str, newer releases parse them.
SHARED_CPU = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
# pinning switches by release: ENABLE_CPU_PINNING from 2023.0, AFFINITY before it
NO_PINNING = (("ENABLE_CPU_PINNING", "NO"), ("AFFINITY", "NONE"))
# what 2022.3's CPU plugin already knew, assumed where a plugin cannot list its properties
OLDEST_KNOWN = ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "NUM_STREAMS", "AFFINITY")


class OpenVINOBackend(Backend):
    name = "openvino"

    def __init__(self, bundle: Bundle, graph: str = "model", device: str = "auto", threads: "int | None" = None,
                 cpu_policy: str = DEFAULT_POLICY):
        artifact = bundle.graph_artifact(self.name, graph)
        self.model_path = bundle.path(artifact["file"])
        self.precision = artifact.get("precision", "fp32")
        core = Core()
        self.available = list(core.available_devices)
        # a graph the NCS2 cannot run (the camera's person detector: loops, non-maximum suppression) says so
        self.device = self._pick_device("CPU" if artifact.get("cpu_only") is True else device)
        self.cpu_policy = check_cpu_policy(cpu_policy)
        self.config = (self._cpu_config(policy_threads(cpu_policy, threads), cpu_policy, supported_cpu_properties(core))
                       if self.device == "CPU" else {})
        # the IR and its weights from the verified bytes (read_model(bytes, bytes): 2022.3 and newer)
        weights = artifact.get("weights") or artifact["file"][:-len(".xml")] + ".bin"
        model = core.read_model(bundle.read(artifact["file"]), bundle.read(weights))
        self.static_batch = not model.input(0).get_partial_shape().is_dynamic
        self.compiled = core.compile_model(model, self.device, self.config)
        self.request = self.compiled.create_infer_request()
        self.output = self.compiled.output(0)
        # float32 for a graph in model units; the sensor's dtype for one with the units inside it
        self.input_dtype = np.dtype(self.compiled.input(0).get_element_type().to_dtype())

    def _pick_device(self, device: str) -> str:
        if device == "auto":
            return next(name for name in PREFERRED_DEVICES + tuple(self.available) if name in self.available)
        if device not in self.available:
            raise BackendUnavailableError(
                f"OpenVINO device {device!r} is not available (found {self.available}); an NCS2 needs "
                "OpenVINO 2022.3 with the MYRIAD plugin and the stick plugged in (lsusb 03e7:2485); "
                "run sensorveil/devices/setup/rpi4-ncs2.sh (or rpi3-ncs2.sh) on the board")
        return device

    @staticmethod
    def _cpu_config(threads: "int | None", cpu_policy: str, supported) -> dict:
        # CPUs with bf16/AMX default to bf16 inference, which moves outputs by ~1e-3; the bundle's
        # precision is in its weights (fp16 IR for the NCS2), so the CPU computes in f32.
        config = {"INFERENCE_PRECISION_HINT": "f32"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = str(threads)
        if cpu_policy == SHARED:
            config.update(SHARED_CPU)
            config.update(next(([item] for item in NO_PINNING if item[0] in supported), []))
        # a key this release's plugin does not know fails compile_model: leave it out instead
        return {key: value for key, value in config.items() if key in supported}

    def run(self, batch: np.ndarray) -> np.ndarray:
        if self.static_batch and len(batch) != 1:
            return np.concatenate([self.run(batch[i:i + 1]) for i in range(len(batch))])
        batch = batch.astype(self.input_dtype, copy=False)    # no copy when it already is
        return np.array(self.request.infer({0: batch})[self.output], copy=True)

    def io_signature(self) -> IOSignature:
        """The inputs' and outputs' names and shapes; a free dimension is None."""
        def ports(ports):
            return [(port.get_any_name(), tuple(dim.get_length() if dim.is_static else None
                                                for dim in port.get_partial_shape())) for port in ports]
        return io_signature_of(ports(self.compiled.inputs), ports(self.compiled.outputs))

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": get_version(), "device": self.device,
                "available_devices": self.available, "precision": self.precision, "model": self.model_path.name,
                "cpu_policy": self.cpu_policy, "config": dict(self.config)}


def supported_cpu_properties(core) -> "set[str]":
    """The CPU plugin's property names (a list in 2022.3, a dict in newer releases)."""
    try:
        return {str(name) for name in core.get_property("CPU", "SUPPORTED_PROPERTIES")}
    except Exception:    # noqa: BLE001 - a plugin that cannot list them: what 2022.3 had
        return set(OLDEST_KNOWN)
