"""OpenVINO adapter: the IR on MYRIAD (Neural Compute Stick 2) when one is plugged in, else CPU.

Which device ran the model is part of ``describe()``, so a benchmark or log always says
whether the stick was used. Asking for device='MYRIAD' explicitly on a machine without a
stick is an error, never a quiet switch to the CPU.
"""
import numpy as np

try:
    from openvino import Core, get_version          # OpenVINO 2023.1 and newer (2026 has nothing else)
except ImportError:   # 2022.3, the last release with MYRIAD: `openvino` is a bare namespace package there
    from openvino.runtime import Core, get_version

from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.errors import BackendUnavailableError

PREFERRED_DEVICES = ("MYRIAD", "CPU")


class OpenVINOBackend:
    name = "openvino"

    def __init__(self, bundle: Bundle, graph: str = "model", device: str = "auto", threads: "int | None" = None):
        artifact = bundle.graph_artifact(self.name, graph)
        self.model_path = bundle.path(artifact["file"])
        self.precision = artifact.get("precision", "fp32")
        core = Core()
        self.available = list(core.available_devices)
        self.device = self._pick_device(device)
        config = self._cpu_config(threads) if self.device == "CPU" else {}
        # the IR and its weights from the verified bytes (read_model(bytes, bytes): 2022.3 and newer)
        weights = artifact.get("weights") or artifact["file"][:-len(".xml")] + ".bin"
        model = core.read_model(bundle.read(artifact["file"]), bundle.read(weights))
        self.static_batch = not model.input(0).get_partial_shape().is_dynamic
        self.compiled = core.compile_model(model, self.device, config)
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
    def _cpu_config(threads: "int | None") -> dict:
        # CPUs with bf16/AMX default to bf16 inference, which moves outputs by ~1e-3; the bundle's
        # precision is in its weights (fp16 IR for the NCS2), so the CPU computes in f32.
        config = {"INFERENCE_PRECISION_HINT": "f32"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        return config

    def run(self, batch: np.ndarray) -> np.ndarray:
        if self.static_batch and len(batch) != 1:
            return np.concatenate([self.run(batch[i:i + 1]) for i in range(len(batch))])
        batch = batch.astype(self.input_dtype, copy=False)    # no copy when it already is
        return np.array(self.request.infer({0: batch})[self.output], copy=True)

    def io_signature(self) -> tuple:
        """([(name, shape)] of the inputs, the same of the outputs); a free dimension is None."""
        def ports(ports):
            return [(port.get_any_name(), tuple(dim.get_length() if dim.is_static else None
                                                for dim in port.get_partial_shape())) for port in ports]
        return ports(self.compiled.inputs), ports(self.compiled.outputs)

    def describe(self) -> dict:
        return {"backend": self.name, "library_version": get_version(), "device": self.device,
                "available_devices": self.available, "precision": self.precision, "model": self.model_path.name}
