"""The registry of mechanisms: one module per paper's family, each registering its Mechanism objects.

    from sensorveil.sdk import mechanisms
    mechanisms.get("pass").train(request)

Families are imported on first use, so importing the registry costs nothing and no module of the
sdk has to import a mechanism module (no import cycles).
"""
from __future__ import annotations

import importlib

from sensorveil.sdk.mechanisms.base import Graph, Mechanism, TrainRequest

# modules under sensorveil.sdk.mechanisms, in the order `sensorveil train --help` lists their mechanisms
FAMILIES = ("prgan", "pass_substitution")
_REGISTRY: dict = {}
_loaded = False


def register(mechanism: Mechanism) -> Mechanism:
    if mechanism.name in _REGISTRY and type(_REGISTRY[mechanism.name]) is not type(mechanism):
        raise ValueError(f"mechanism {mechanism.name!r} is registered twice")
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def _load_families() -> None:
    global _loaded
    if not _loaded:
        for family in FAMILIES:
            importlib.import_module(f"sensorveil.sdk.mechanisms.{family}")
        _loaded = True


def names() -> tuple:
    _load_families()
    return tuple(_REGISTRY)


def get(name: str) -> Mechanism:
    _load_families()
    if name not in _REGISTRY:
        raise ValueError(f"unknown mechanism {name!r}; expected one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


__all__ = ["Mechanism", "TrainRequest", "Graph", "register", "get", "names", "FAMILIES"]
