"""The Flower apps that `flwr run` starts for pass-federated (a deployment). Flower finds a component
("module:attribute") by reading the module's source for a top-level name, so they are module-level
objects, kept apart so that only Flower's own processes import flwr."""
from sensorveil.sdk.mechanisms.pass_federated_parts.server import flower_apps

_APPS = flower_apps()
client_app = _APPS["client_app"]
server_app = _APPS["server_app"]
