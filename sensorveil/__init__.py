"""sensorveil: privacy at the sensor.

Areas (see docs/design.md): ``sdk`` trains and evaluates mechanisms, ``export`` writes
bundles, ``runtime`` runs them on the device (numpy + one backend, never torch),
``benchmarks`` measures them, ``devices`` describes the boards.
"""
__version__ = "0.1.0"
