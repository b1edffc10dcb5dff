"""Torch-free runtime: numpy plus one backend library. Never imports torch, sdk or export."""
from sensorveil.runtime.bundle import SCHEMA_VERSION, Bundle, open_bundle
from sensorveil.runtime.errors import BackendUnavailableError, BundleError, InputError, OutputError, SensorveilError
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.schema import ManifestError
from sensorveil.runtime.trust import TrustError

__all__ = ["Privatizer", "Bundle", "open_bundle", "SCHEMA_VERSION", "BundleError", "InputError", "OutputError",
           "BackendUnavailableError", "SensorveilError", "ManifestError", "TrustError"]
