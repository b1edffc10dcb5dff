"""Errors the runtime raises. Each names what was expected, so a device log is enough to fix it."""


class SensorveilError(Exception):
    """Base class of every error sensorveil raises on purpose."""


class BundleError(SensorveilError):
    """A bundle is missing, malformed, of an unknown schema version, or fails its sha256."""


class InputError(SensorveilError, ValueError):
    """A frame or batch does not match the bundle's input spec (shape, dtype, finite values)."""


class BackendUnavailableError(SensorveilError, RuntimeError):
    """The backend library or the hardware it needs is not present on this machine."""


class OutputError(SensorveilError, ValueError):
    """The mechanism produced something the output spec does not allow (NaN, out of range, not what the
    manifest says a stage returns): nothing is released; a stream counts the frame as bad."""
