"""The registry of mechanisms: one module per paper's family, each registering its Mechanism objects.

    from sensorveil.sdk import mechanisms
    mechanisms.get("pass").train(request)

FAMILIES maps each module under sensorveil/sdk/mechanisms to the names it registers, so the CLI
can list mechanisms without importing torch; modules are imported on first ``get``. No module of
the sdk imports a mechanism module, so there are no import cycles. A new mechanism is one module
plus one line here; a key with a dot is a full module path (a mechanism kept outside sensorveil).
"""
import importlib

FAMILIES = {
    "prgan": ("prgan", "ngp", "ap", "laplace"),
    "prgan_med": ("prgan-med",),
    "pass_substitution": ("pass",),
    "attriguard": ("attriguard",),
    "sanitizer": ("sanitizer",),
    "tappfl": ("tappfl",),
    "pass_federated": ("pass-federated",),
}
_REGISTRY = {}


def register(mechanism):
    """Called by each family module for each Mechanism it defines."""
    if mechanism.name in _REGISTRY and type(_REGISTRY[mechanism.name]) is not type(mechanism):
        raise ValueError(f"mechanism {mechanism.name!r} is registered twice")
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def names() -> tuple:
    """Every registered name, from FAMILIES (no import of torch)."""
    return tuple(name for family in FAMILIES.values() for name in family)


def get(name: str):
    family = next((module for module, members in FAMILIES.items() if name in members), None)
    if family is None:
        raise ValueError(f"unknown mechanism {name!r}; expected one of {', '.join(names())}")
    module = family if "." in family else f"sensorveil.sdk.mechanisms.{family}"
    importlib.import_module(module)
    if name not in _REGISTRY:
        raise ValueError(f"module {module} did not register {name!r}")
    return _REGISTRY[name]


__all__ = ["register", "get", "names", "FAMILIES"]
