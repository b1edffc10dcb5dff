"""The ServerApp: seeded f and g, then ``rounds`` rounds in which every device runs PASS's local steps
and the configured strategy (FedAvg, FedMedian or FedTrimmedAvg, every update validated first)
combines f and g; and the Flower apps for simulation and deployment. flwr is imported where needed."""
from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import torch

from sensorveil.sdk.federated.apps import flower_app_pair, simulation_pair
from sensorveil.sdk.mechanisms.pass_federated_parts.client import device_train
from sensorveil.sdk.mechanisms.pass_federated_parts.device import build_model
from sensorveil.sdk.mechanisms.pass_parts.bundle import WEIGHTS_FILE
from sensorveil.sdk.mechanisms.tappfl_parts.server import server_strategy, strategy_settings
from sensorveil.sdk.training import set_seed

HISTORY_FILE = "federation_rounds.json"
TAG = "[pass-federated]"


class RoundLog:
    """One line a round, and the history the run record keeps: devices sampled, updates aggregated,
    every update dropped and why, the mean loss terms."""

    def __init__(self, rounds: int, history: list, verbose: bool):
        self.rounds, self.history, self.verbose, self.strategy = rounds, history, verbose, None

    def __call__(self, stage: str, server_round: int, metrics: dict, seconds: float, devices: int,
                 dropped: list = ()) -> None:
        if stage != "train":
            return
        metrics = {k: float(v) for k, v in metrics.items() if k != "num-examples"}
        sampled = self.strategy.sent.get("train", devices) if self.strategy is not None else devices
        self.history.append({"round": server_round, "sampled": int(sampled), "devices": devices,
                             "dropped": list(dropped), "seconds": round(seconds, 2), "train": metrics})
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
            print(f"{TAG} round {server_round}/{self.rounds}: {devices} of {sampled} devices aggregated, "
                  f"{len(dropped)} dropped, {seconds:.1f} s | {shown}", flush=True)


def initial_model(spec: dict):
    """f and g the server broadcasts first: seeded as central PASS's ``fit`` seeds them."""
    set_seed(int(spec["config"]["seed"]))
    return build_model(spec["task"]["model"])


def round_config(spec: dict):
    from flwr.app import ConfigRecord
    cfg, weights = spec["config"], spec["weights"]
    return ConfigRecord({"task": json.dumps(spec["task"]), "lam": float(weights["lambda"]),
                         "mu": float(weights["mu"]), "lr": float(cfg["lr"]), "weight-decay": float(cfg["weight_decay"]),
                         "local-epochs": int(cfg["local_epochs"]), "batch-size": int(cfg["batch_size"]),
                         "rounds": int(cfg["rounds"])})


def run_server(grid, spec: dict) -> None:
    """@server_app.main(): every device every round, the strategy over f and g; writes the weights (the
    file central PASS writes) and the round history into the run directory."""
    from flwr.app import ArrayRecord
    cfg = spec["config"]
    random.seed(cfg["seed"])
    history = []
    log = RoundLog(int(cfg["rounds"]), history, bool(cfg["progress"]))
    strategy = server_strategy(spec)(
        fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=spec["num_clients"], min_evaluate_nodes=1,
        min_available_nodes=spec["num_clients"], progress=log, **strategy_settings(spec))
    log.strategy = strategy
    config = round_config(spec)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(initial_model(spec).state_dict()),
                            num_rounds=int(cfg["rounds"]), timeout=cfg["round_timeout_s"], train_config=config,
                            evaluate_config=config)
    out = Path(spec["out_dir"])
    torch.save(result.arrays.to_torch_state_dict(), out / WEIGHTS_FILE)
    (out / HISTORY_FILE).write_text(json.dumps(history, indent=2))


def simulation_apps(spec: dict):
    """(ServerApp, ClientApp) for flwr.simulation.run_simulation (federated.simulate's factory)."""
    return simulation_pair(run_server, spec, flower_apps()["client_app"])


@functools.lru_cache(maxsize=1)
def flower_apps() -> dict:
    """The ClientApp and the deployment ServerApp (its spec comes from the run config of `flwr run`)."""
    return flower_app_pair(run_server, device_train)
