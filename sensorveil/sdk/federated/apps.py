"""The Flower apps every federated mechanism needs, built from its own server loop and device handlers, and
the Flower App directory a deployment hands to `flwr run`.

A mechanism has a ``run_server(grid, spec)`` and a ``device_train(msg, context)`` (and maybe a
``device_evaluate``); the simulation pairs a ServerApp that runs its loop on a given spec with its ClientApp,
and a deployment's ServerApp reads the spec from the run config that `flwr run` passes.
"""
import json
from pathlib import Path


def protection_mods() -> list:
    """The client mods every device runs: Flower's SecAgg+ masking and differential privacy clipping, each
    acting only on a round whose server asked for it (federated.privacy_options), so one ClientApp serves
    every run; the adapter between them gives the mechanism's handler SecAgg+'s legacy message in its own form."""
    from sensorveil.sdk.federated.differential_privacy import clipping_when_asked
    from sensorveil.sdk.federated.secure_aggregation import fitins_adapter, secure_aggregation_when_asked
    return [secure_aggregation_when_asked, fitins_adapter, clipping_when_asked]


def flower_app_pair(run_server, device_train, device_evaluate=None) -> dict:
    """{"client_app", "server_app"}: the deployment's apps (the server's spec from `flwr run`'s run config)."""
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    client, server = ClientApp(mods=protection_mods()), ServerApp()
    client.train()(device_train)
    if device_evaluate is not None:
        client.evaluate()(device_evaluate)

    @server.main()
    def main(grid, context) -> None:
        run_server(grid, json.loads(str(context.run_config["spec"])))
    return {"client_app": client, "server_app": server}


def simulation_pair(run_server, spec: dict, client_app):
    """(ServerApp, ClientApp) for flwr.simulation.run_simulation, the server running on ``spec``."""
    from flwr.serverapp import ServerApp
    server = ServerApp()

    @server.main()
    def main(grid, context) -> None:
        run_server(grid, spec)
    return server, client_app


def write_flower_app(app_dir: Path, serverapp: str, clientapp: str, config: dict, name: str = "sensorveil-app") -> Path:
    """A Flower App directory (pyproject.toml) whose components live in sensorveil (installed on every
    machine of the federation) and whose run config is ``config``."""
    import tomli_w
    app_dir = Path(app_dir)
    app_dir.mkdir(parents=True, exist_ok=True)
    document = {"build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
                "project": {"name": name, "version": "1.0.0", "description": "sensorveil federated training",
                            "license": "Apache-2.0", "dependencies": []},
                "tool": {"flwr": {"app": {"publisher": "sensorveil",
                                          "components": {"serverapp": serverapp, "clientapp": clientapp},
                                          "config": config}}}}
    (app_dir / "pyproject.toml").write_text(tomli_w.dumps(document))
    return app_dir
