"""The ServerApp: pre-training rounds, then TAPPFL rounds, FedAvg (or the configured strategy) over f
only; and the Flower apps for simulation and deployment. flwr is imported where it is needed."""
from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import torch
from torch import nn

from sensorveil.sdk.federated.apps import flower_app_pair, simulation_pair
from sensorveil.sdk.mechanisms.tappfl_parts.bundle import FEATURE_FILE, HISTORY_FILE, pretrained_path
from sensorveil.sdk.mechanisms.tappfl_parts.client import device_evaluate, device_train
from sensorveil.sdk.mechanisms.tappfl_parts.model import feature_extractor


class RoundLog:
    """Progress per round (one line each) and the history the run record keeps."""

    def __init__(self, phase: str, rounds: int, history: list, verbose: bool):
        self.phase, self.rounds, self.history, self.verbose = phase, rounds, history, verbose

    def __call__(self, stage: str, server_round: int, metrics: dict, seconds: float, devices: int,
                 dropped: list = ()) -> None:
        metrics = {k: float(v) for k, v in metrics.items() if k != "num-examples"}
        if stage == "train":
            self.history.append({"phase": self.phase, "round": server_round, "devices": devices,
                                 "seconds": round(seconds, 2), "train": metrics, "dropped": list(dropped)})
        else:
            self.history[-1]["evaluate"] = {"devices": devices, "seconds": round(seconds, 2), **metrics,
                                            "dropped": list(dropped)}
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
            label = f"{self.phase} round {server_round}/{self.rounds}" if stage == "train" else "  evaluate"
            print(f"[tappfl] {label}: {devices} devices, {seconds:.1f} s | {shown}", flush=True)


def phase_config(spec: dict, phase: str):
    from flwr.app import ConfigRecord
    cfg = spec["config"]
    return ConfigRecord({"task": json.dumps(spec["task"]), "phase": phase,
                         "lam": float(cfg["lam"]) if phase == "tappfl" else 0.0,
                         "privacy-bound": cfg["privacy_bound"], "local-epochs": int(cfg["local_epochs"]),
                         "batch-size": int(cfg["batch_size"]), "lr": float(cfg["lr"])})


def initial_feature_extractor(spec: dict) -> nn.Module:
    """Theta_0 the server broadcasts: seeded, or a pre-trained f when the config names one."""
    model = spec["task"]["model"]
    torch.manual_seed(spec["config"]["seed"])
    f = feature_extractor(model["input_dim"], model["representation_dim"])
    if spec["config"]["pretrained"]:
        f.load_state_dict(torch.load(pretrained_path(spec["config"]["pretrained"]), weights_only=True))
    return f


def server_strategy(spec: dict):
    from sensorveil.sdk.federated.strategy import strategy_class
    return strategy_class(spec["config"].get("aggregation", "fedavg"))


def evaluated_every(strategy_cls, every: int, last_round: int):
    """``strategy_cls`` evaluating the devices only every ``every`` rounds and in ``last_round`` (config
    evaluate_every); the rounds between send no evaluate message. Through StrictRounds' bookkeeping, so a
    skipped round expects no reply."""
    if every <= 1:
        return strategy_cls

    class EvaluatedEvery(strategy_cls):
        def configure_evaluate(self, server_round, arrays, config, grid):
            if server_round % every and server_round != last_round:
                return self._remember("evaluate", [])
            return super().configure_evaluate(server_round, arrays, config, grid)

    return EvaluatedEvery


def strategy_settings(spec: dict) -> dict:
    """The typed settings of the strategy: what the server accepts from a device, trimming, and the
    protections the config asks for (SecAgg+, differential privacy)."""
    from sensorveil.sdk.federated.privacy_options import strategy_privacy_settings
    from sensorveil.sdk.federated.validation import UpdateLimits
    cfg, limits = spec["config"], spec.get("limits", {})
    settings = {"limits": UpdateLimits(max_examples=limits.get("max_examples") or None,
                                       max_update_ratio=float(cfg.get("max_update_ratio", 0.0)),
                                       norm_multiple=float(cfg.get("norm_multiple", 0.0))),
                "min_valid_replies": int(cfg.get("min_valid_replies", 0)),
                **strategy_privacy_settings(cfg, limits.get("max_examples"))}
    if cfg.get("aggregation") == "fedtrimmedavg":
        settings["beta"] = float(cfg["trim_fraction"])
    return settings


def run_server(grid, spec: dict) -> None:
    """@server_app.main(): pre-training rounds, then TAPPFL rounds, FedAvg over f only; writes f and the
    round history into the run directory."""
    from flwr.app import ArrayRecord
    cfg = spec["config"]
    random.seed(cfg["seed"])   # Flower samples the devices of a round with `random`
    arrays = ArrayRecord(initial_feature_extractor(spec).state_dict())
    history = []
    for phase, rounds in (("pretrain", cfg["pretrain_rounds"]), ("tappfl", cfg["rounds"])):
        if rounds <= 0:
            continue
        everyone = cfg["participation"] == "all"
        strategy = evaluated_every(server_strategy(spec), int(cfg.get("evaluate_every", 1)), int(rounds))(
            fraction_train=1.0 if everyone else cfg["fraction"],
            aggregate_fraction=cfg["fraction"] if everyone else None,
            fraction_evaluate=cfg["evaluate_fraction"] if phase == "tappfl" else 0.0,
            min_train_nodes=1, min_evaluate_nodes=1, min_available_nodes=spec["num_clients"],
            progress=RoundLog(phase, rounds, history, cfg["progress"]), **strategy_settings(spec))
        config = phase_config(spec, phase)
        arrays = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=int(rounds),
                                timeout=cfg["round_timeout_s"], train_config=config,
                                evaluate_config=config).arrays
    out = Path(spec["out_dir"])
    torch.save(arrays.to_torch_state_dict(), out / FEATURE_FILE)
    (out / HISTORY_FILE).write_text(json.dumps(history, indent=2))


def simulation_apps(spec: dict):
    """(ServerApp, ClientApp) for flwr.simulation.run_simulation (federated.simulate's factory)."""
    return simulation_pair(run_server, spec, flower_apps()["client_app"])


@functools.lru_cache(maxsize=1)
def flower_apps() -> dict:
    """The ClientApp and the deployment ServerApp (its spec comes from the run config of `flwr run`)."""
    return flower_app_pair(run_server, device_train, device_evaluate)
