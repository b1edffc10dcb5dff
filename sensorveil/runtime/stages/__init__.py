"""The registry of pipeline stage kinds: manifest name -> the module and class that run it.

Modules are imported when a bundle names their kind, so a board loads only what its bundle uses.
A new mechanism's numpy step is one module here plus one line in STAGE_KINDS.
"""
import importlib

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.stages.base import (
    BANK_INDEX,
    EMITS,
    GRAPH_UNITS,
    MODEL_UNITS,
    REPRESENTATION,
    SENSOR_UNITS,
    Stage,
    StageContext,
)

STAGE_KINDS = {
    "model": ("sensorveil.runtime.stages.model", "ModelStage"),
    "substitution": ("sensorveil.runtime.stages.substitution", "SubstitutionStage"),
    "attriguard": ("sensorveil.runtime.stages.attriguard", "AttriGuardStage"),
    "sanitizer": ("sensorveil.runtime.stages.sanitizer", "SanitizerStage"),
    "prgan-med": ("sensorveil.runtime.stages.prgan_med", "PRGANMEDStage"),
    "posterior-sample": ("sensorveil.runtime.stages.posterior", "PosteriorSampleStage"),
}


def stage_class(kind):
    if kind not in STAGE_KINDS:
        raise BundleError("pipeline stage kind {!r} is not known to this runtime; expected one of {} "
                          "(upgrade sensorveil on the device)".format(kind, sorted(STAGE_KINDS)))
    module, name = STAGE_KINDS[kind]
    return getattr(importlib.import_module(module), name)


__all__ = ["Stage", "StageContext", "STAGE_KINDS", "stage_class", "EMITS", "MODEL_UNITS", "SENSOR_UNITS",
           "BANK_INDEX", "REPRESENTATION", "GRAPH_UNITS"]
