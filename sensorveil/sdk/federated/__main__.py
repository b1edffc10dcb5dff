"""``python -m sensorveil.sdk.federated simulate MODULE:FACTORY SPEC.json``: the child process of
``federated.simulate`` (Flower's simulation runtime on the apps the factory builds from the spec)."""
import sys

from sensorveil.sdk.federated.simulation import _simulate_main

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "simulate":
        sys.exit("usage: python -m sensorveil.sdk.federated simulate MODULE:FACTORY SPEC.json")
    sys.exit(_simulate_main(sys.argv[2], sys.argv[3]))
