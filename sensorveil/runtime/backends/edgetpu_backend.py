"""Edge TPU adapter: LiteRT with the libedgetpu delegate, on a model compiled by edgetpu_compiler.

No silent fallback: a bundle whose int8 model was never compiled, or a machine without
libedgetpu.so.1 or without an Edge TPU attached, gets one error naming what is missing
and the profile's set-up script; running the same file on the CPU is the 'litert' backend.
"""
import platform

from sensorveil.runtime.backends.litert_backend import LiteRTBackend, litert
from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.errors import BackendUnavailableError

DELEGATE = {"Linux": "libedgetpu.so.1", "Darwin": "libedgetpu.1.dylib", "Windows": "edgetpu.dll"}
SETUP_HINT = "run sensorveil/devices/setup/coral-usb.sh (or coral-devboard.sh) on the board"


class EdgeTPUBackend(LiteRTBackend):
    name = "edgetpu"

    def __init__(self, bundle: Bundle, graph: str = "model", device: "str | None" = None, threads: "int | None" = None,
                 cpu_policy: str = "dedicated"):
        artifact = bundle.graph_artifact(self.name, graph)
        if not artifact.get("compiled"):
            raise BackendUnavailableError(
                f"{bundle.root}: the Edge TPU model is not compiled yet; on an x86-64 Linux host with "
                f"edgetpu_compiler run: sensorveil devices compile {bundle.root} [--sign KEY] (it compiles, lists "
                "the compiled file in the manifest and re-signs), or use backend='litert' to run the int8 model "
                "on the CPU")
        self.device = device   # 'usb', 'usb:0', 'pci:0' ... None: the first Edge TPU found
        super().__init__(bundle, graph=graph, threads=threads, cpu_policy=cpu_policy)

    def _make_interpreter(self, threads):
        library = DELEGATE.get(platform.system(), DELEGATE["Linux"])
        options = {"device": self.device} if self.device else {}
        try:
            delegate = litert.load_delegate(library, options)
        except (ValueError, RuntimeError, OSError) as error:
            raise BackendUnavailableError(
                f"the Edge TPU delegate {library} could not be loaded ({error}); it needs libedgetpu1-std "
                f"and a Coral device attached (lsusb 1a6e:089a or 18d1:9302); {SETUP_HINT}") from None
        return litert.Interpreter(model_content=self.model_content, experimental_delegates=[delegate],
                                  num_threads=threads)

    def describe(self) -> dict:
        return {**super().describe(), "delegate": DELEGATE.get(platform.system()), "device": self.device or "auto"}
