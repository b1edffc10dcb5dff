"""The Flower apps that `flwr run` starts (a deployment: SuperLink and SuperNodes as processes).

Flower finds a component reference ("module:attribute" in the app's pyproject.toml) by reading the
module's source for a top-level name before it imports anything, so the apps must be module-level
objects. They live here rather than in the mechanism's module so that only Flower's own processes
pay for importing flwr; training, export and evaluation import the mechanism without it.
"""
from sensorveil.sdk.mechanisms.tappfl import flower_apps

_TAPPFL = flower_apps()
tappfl_client_app = _TAPPFL["client_app"]
tappfl_server_app = _TAPPFL["server_app"]
