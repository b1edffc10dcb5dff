"""The Flower apps every federated mechanism needs, built from its own server loop and device handlers.

A mechanism has a ``run_server(grid, spec)`` and a ``device_train(msg, context)`` (and maybe a
``device_evaluate``); the simulation pairs a ServerApp that runs its loop on a given spec with its ClientApp,
and a deployment's ServerApp reads the spec from the run config that `flwr run` passes.
"""
import json


def flower_app_pair(run_server, device_train, device_evaluate=None) -> dict:
    """{"client_app", "server_app"}: the deployment's apps (the server's spec from `flwr run`'s run config)."""
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    client, server = ClientApp(), ServerApp()
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
