"""One small adapter per backend behind one interface (sensorveil.runtime.backends.base.Backend).

Adapters stay a few lines each and cannot disagree about pre- or post-processing, because sensor units
live in the Privatizer. Each adapter imports its library inside its own module only, so the runtime
imports on a device that has just one of them.
"""
import importlib
import importlib.util
from collections import namedtuple

from sensorveil.runtime.backends.base import Backend
from sensorveil.runtime.backends.cpu_policy import DEFAULT_POLICY, check_cpu_policy
from sensorveil.runtime.bundle import Bundle
from sensorveil.runtime.capabilities import (
    CAPABILITIES,
    auto_order_of_table,
    hardware_backends,
    row_for_backend,
    split_reference,
)
from sensorveil.runtime.errors import BackendUnavailableError, BundleError, SensorveilError

# backend name -> (adapter module, adapter class), from the capability table's adapter column
ADAPTERS = {row.backend: split_reference(row.adapter) for row in CAPABILITIES}
REGISTRY = {name: adapter + (row_for_backend(name).runtime_package,) for name, adapter in ADAPTERS.items()}
# Modules that provide the same library where the registry's package has no wheel (Coral boards).
ALTERNATIVE_MODULES = {row.backend: row.runtime_alternatives for row in CAPABILITIES if row.runtime_alternatives}
# Backends that need hardware: 'auto' takes them only when a matching device profile is detected.
HARDWARE_BACKENDS = hardware_backends()
# Order in which backend="auto" tries what the bundle carries: fastest accelerator first.
AUTO_ORDER = auto_order_of_table()


def library_available(backend: str) -> bool:
    modules = (REGISTRY[backend][2],) + ALTERNATIVE_MODULES.get(backend, ())
    return any(importlib.util.find_spec(module) is not None for module in modules)


def auto_order() -> "list[str]":
    """Backends of the detected device profiles first, then AUTO_ORDER without undetected hardware."""
    return _auto_order(_detected_backends())


def _detected_backends() -> "list[str]":
    from sensorveil.devices import detect, load_profile
    return [load_profile(match["name"])["backend"] for match in detect()]


def _auto_order(detected: "list[str]") -> "list[str]":
    rest = [name for name in AUTO_ORDER if name not in HARDWARE_BACKENDS]
    return list(dict.fromkeys(detected + rest))


# (chosen backend name, why: one line a console, a JSON report and a benchmark table can show)
BackendChoice = namedtuple("BackendChoice", ["name", "why"])


def resolve_backend(bundle: Bundle, requested: str) -> str:
    """'auto' picks the first backend the bundle has an artifact for and whose library imports."""
    return choose_backend(bundle, requested).name


def choose_backend(bundle: Bundle, requested: str) -> BackendChoice:
    """The backend that will run ``bundle`` and why, in words. 'auto' walks the detected boards'
    backends, then AUTO_ORDER, and says why it passed over each backend the bundle carries (hardware not
    detected, library not installed, an Edge TPU model not compiled): a CPU run is never silent."""
    if requested != "auto":
        if requested not in REGISTRY:
            raise BackendUnavailableError(
                f"unknown backend {requested!r}; expected one of: auto, {', '.join(REGISTRY)}")
        return BackendChoice(requested, f"as asked; {runs_on(requested)}")
    known = [name for name in bundle.manifest["artifacts"] if name in REGISTRY]
    if not known:   # a bundle problem (or a newer exporter's), not a library to install
        raise BundleError(f"{bundle.root}: the bundle's artifacts {sorted(bundle.manifest['artifacts'])} name no "
                          f"backend this runtime knows; expected one of {', '.join(REGISTRY)} (upgrade sensorveil "
                          "or re-export the bundle)")
    order = _auto_order(_detected_backends())
    carried = [name for name in order if name in known]
    passed_over = ["{}: {}".format(name, NOT_DETECTED.format(row_for_backend(name).accelerator))
                   for name in known if name not in order]
    for name in carried:
        reason = _unusable(bundle, name)
        if reason is None:
            return BackendChoice(name, "auto: " + "; ".join(passed_over + [runs_on(name)]))
        passed_over.append(f"{name}: {reason}")
    raise BackendUnavailableError(
        f"no backend library for this bundle is installed; the bundle carries {carried or 'nothing usable'}; "
        + "; ".join(f"install '{REGISTRY[name][2]}' for {name}" for name in carried))


NOT_DETECTED = "no {} detected"


def runs_on(backend: str) -> str:
    """Where a backend runs the model, in the words the console prints."""
    accelerator = row_for_backend(backend).accelerator
    if accelerator:
        return f"running on the {accelerator}"
    if backend == "openvino":
        return "running on OpenVINO's device (an NCS2 when one is plugged in, else the CPU)"
    return "running on the CPU"


def _unusable(bundle: Bundle, name: str) -> "str | None":
    """Why 'auto' cannot take ``name`` for this bundle, or None."""
    if not library_available(name):
        return f"package '{REGISTRY[name][2]}' not installed"
    if name == "edgetpu":
        if not all(bundle.graph_artifact(name, graph).get("compiled") for graph in bundle.graph_names(name)):
            return "model not compiled (sensorveil devices compile BUNDLE, on a host with edgetpu_compiler)"
    return None


def create_backend(bundle: Bundle, name: str, **options) -> Backend:
    """``options``: the adapter's own (graph, threads, device, ...) and ``cpu_policy`` ("shared" or
    "dedicated", sensorveil.runtime.backends.cpu_policy), which every adapter takes."""
    check_cpu_policy(options.get("cpu_policy", DEFAULT_POLICY))   # before a library is even imported
    module_name, class_name, package = REGISTRY[name]
    if not library_available(name):
        raise BackendUnavailableError(
            f"backend {name!r} needs the Python package '{package}', which is not installed "
            f"(pip install {package}){_setup_hint(name)}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, class_name)(bundle, **options)
    except (SensorveilError, TypeError):      # ours already say what was expected; TypeError: a wrong option
        raise
    except Exception as error:    # the library's own parse error: a manifest can call any listed file a model
        raise BundleError(
            f"{bundle.root}: the {name} backend could not load graph {options.get('graph', 'model')!r} "
            f"({type(error).__name__}: {str(error)[:300]}); expected a model file this library reads, "
            "as the exporter writes it") from None


def _setup_hint(backend: str) -> str:
    from sensorveil.devices import profiles_for_backend, setup_script
    scripts = [f"{setup_script(name).relative_to(setup_script(name).parents[3])}"
               for name in profiles_for_backend(backend)]
    return f"; on a board, run its set-up script: {', '.join(scripts)}" if scripts else ""
