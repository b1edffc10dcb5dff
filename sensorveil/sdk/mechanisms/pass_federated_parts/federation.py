"""Running pass-federated's federation from train(): its spec (what every node needs to find its rows,
build f and g and run PASS's steps), in Flower's simulation runtime or through `flwr run` against a
SuperLink (TAPPFL's loopback deployment)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig
from sensorveil.sdk.mechanisms.pass_federated_parts.device import partitions
from sensorveil.sdk.mechanisms.pass_federated_parts.server import TAG
from sensorveil.sdk.mechanisms.pass_parts.bundle import WEIGHTS_FILE
from sensorveil.sdk.mechanisms.pass_parts.data import PassData
from sensorveil.sdk.mechanisms.pass_parts.train import resolved_weights

SIMULATION_APPS = "sensorveil.sdk.mechanisms.pass_federated_parts.server:simulation_apps"
SERVER_APP = "sensorveil.sdk.mechanisms.pass_federated_parts.apps:server_app"
CLIENT_APP = "sensorveil.sdk.mechanisms.pass_federated_parts.apps:client_app"


def federation_spec(data: PassData, base: dict, config: PassFederatedConfig, out: Path) -> dict:
    lam, mu = resolved_weights(config, len(data.useful), len(data.private))
    model = {"modality": base["modality"], "model_shape": list(base["model_shape"]),
             "bank_size": int(len(data.bank_rows)), "embedding_dim": int(config.embedding_dim),
             "tau": float(config.tau)}
    task = {"dataset": base["dataset"], "useful": data.useful, "private": data.private, "hidden": data.hidden,
            "seed": int(config.seed), "substitutes": int(config.substitutes), "condition": config.condition,
            "clients": int(config.clients), "partition": config.partition, "alpha": float(config.alpha),
            "partition_by": config.partition_by,
            "model": model}
    largest = max(len(part) for part in partitions(data, task))
    return {"task": task, "config": asdict(config), "weights": {"lambda": lam, "mu": mu},
            "num_clients": int(config.clients), "cpus": int(config.cpus),
            "limits": {"max_examples": int(config.max_examples or largest)}, "out_dir": str(Path(out).resolve())}


def federate(spec: dict, out: Path, config: PassFederatedConfig) -> float:
    """Run the federation the config names; returns its wall time in seconds."""
    (out / WEIGHTS_FILE).unlink(missing_ok=True)   # never read weights an earlier run left
    if config.federation == "simulation":
        seconds = federated.simulate(SIMULATION_APPS, spec, out, config.timeout_s)
    else:
        app = federated.write_flower_app(out / "flower-app", SERVER_APP, CLIENT_APP, {"spec": json.dumps(spec)},
                                         name="sensorveil-pass-federated")
        started = time.time()
        federated.flwr_run(app, config.superlink, config.timeout_s, log_path=out / "flwr-run.log",
                           echo=(lambda line: TAG in line) if config.progress else None)
        seconds = time.time() - started
    if not (out / WEIGHTS_FILE).is_file():
        raise federated.FederationError(f"the federation finished without writing {out / WEIGHTS_FILE}; the "
                                        "ServerApp failed (see the log above or `flwr log`)")
    return seconds
