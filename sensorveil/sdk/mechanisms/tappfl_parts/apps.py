"""The Flower apps that `flwr run` starts for TAPPFL (a deployment: SuperLink and SuperNodes as processes).

Flower finds a component reference ("module:attribute" in the app's pyproject.toml) by reading the
module's source for a top-level name before it imports anything, so the apps must be module-level
objects. They live here rather than in the mechanism's module so that only Flower's own processes
pay for importing flwr; training, export and evaluation import the mechanism without it.
"""
from sensorveil.sdk.mechanisms.tappfl_parts.server import flower_apps

_APPS = flower_apps()
client_app = _APPS["client_app"]
server_app = _APPS["server_app"]
