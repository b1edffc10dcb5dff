"""torch -> deployable bundle. One method per format, every export validated the same way."""
from sensorveil.export.exporter import FORMATS, Exporter, export_run

__all__ = ["Exporter", "export_run", "FORMATS"]
