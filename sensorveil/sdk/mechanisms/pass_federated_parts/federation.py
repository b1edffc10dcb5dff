"""Running pass-federated's federation from train(): the bank and the devices' rows (each device's in a
folder of its own), the spec (what the server needs, and what every node is sent each round: the model's
shape, PASS's settings, the bank's labels, never a row), in Flower's simulation runtime or through
`flwr run` against a SuperLink (TAPPFL's loopback deployment)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms.pass_federated_parts.bank import BankPlan, plan_bank
from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig
from sensorveil.sdk.mechanisms.pass_federated_parts.device import partitions
from sensorveil.sdk.mechanisms.pass_federated_parts.folders import DEVICES_DIR, write_device_folders
from sensorveil.sdk.mechanisms.pass_federated_parts.server import TAG
from sensorveil.sdk.mechanisms.pass_parts.bundle import WEIGHTS_FILE
from sensorveil.sdk.mechanisms.pass_parts.data import PassData, prepare_data
from sensorveil.sdk.mechanisms.pass_parts.train import resolved_weights

SIMULATION_APPS = "sensorveil.sdk.mechanisms.pass_federated_parts.server:simulation_apps"
SERVER_APP = "sensorveil.sdk.mechanisms.pass_federated_parts.apps:server_app"
CLIENT_APP = "sensorveil.sdk.mechanisms.pass_federated_parts.apps:client_app"


def federated_data(dataset, useful, private, hidden, config: PassFederatedConfig) -> tuple[PassData, BankPlan]:
    """PASS's splits with the bank from the declared source (bank.py), and where it came from."""
    data = prepare_data(dataset, useful, private, hidden, config.substitutes, config.seed,
                        bank_rows=np.zeros(0, np.int64), condition=config.condition)
    plan = plan_bank(dataset, data.train_rows, config.bank_source, config.server_share, config.substitutes,
                     config.seed)
    data.bank_rows = plan.bank_rows
    return data, plan


def bank_task(data: PassData) -> dict:
    """What every device is sent of the server-held bank: its useful labels (eq. 7's U') and, for a
    conditioned draw, its condition values; never its samples."""
    condition = None if data.condition is None else data.labels(data.condition)[data.bank_rows].tolist()
    return {"useful": [data.labels(a)[data.bank_rows].tolist() for a in data.useful], "condition": condition}


def prepare_federation(data: PassData, plan: BankPlan, base: dict, config: PassFederatedConfig,
                       out: Path) -> tuple[dict, list]:
    """(the spec, each device's rows): writes every device's rows to its own folder under out/devices."""
    out = Path(out).resolve()
    lam, mu = resolved_weights(config, len(data.useful), len(data.private))
    model = {"modality": base["modality"], "model_shape": list(base["model_shape"]),
             "bank_size": data.bank_size, "embedding_dim": int(config.embedding_dim),
             "tau": float(config.tau)}
    task = {"useful": data.useful, "private": data.private, "seed": int(config.seed),
            "clients": int(config.clients), "partition": config.partition, "alpha": float(config.alpha),
            "partition_by": config.partition_by, "devices_dir": str(out / DEVICES_DIR),
            "classes": {"private": [data.classes(a) for a in data.private],
                        "useful": [data.classes(a) for a in data.useful]},
            "bank": bank_task(data), "model": model}
    parts = partitions(data, task, plan.device_rows)
    write_device_folders(out / DEVICES_DIR, data, parts)
    largest = max(len(part) for part in parts)
    spec = {"task": task, "config": asdict(config), "weights": {"lambda": lam, "mu": mu},
            "num_clients": int(config.clients), "cpus": int(config.cpus),
            "limits": {"max_examples": int(config.max_examples or largest)}, "out_dir": str(out)}
    return spec, parts


def federate(spec: dict, out: Path, config: PassFederatedConfig) -> float:
    """Run the federation the config names; returns its wall time in seconds."""
    (out / WEIGHTS_FILE).unlink(missing_ok=True)   # never read weights an earlier run left
    echo = (lambda line: TAG in line) if config.progress else None
    if config.federation == "simulation":
        seconds = federated.simulate(SIMULATION_APPS, spec, out, config.timeout_s, echo=echo)
    else:
        app = federated.write_flower_app(out / "flower-app", SERVER_APP, CLIENT_APP, {"spec": json.dumps(spec)},
                                         name="sensorveil-pass-federated")
        started = time.time()
        federated.flwr_run(app, config.superlink, config.timeout_s, log_path=out / "flwr-run.log", echo=echo)
        seconds = time.time() - started
    if not (out / WEIGHTS_FILE).is_file():
        raise federated.FederationError(f"the federation finished without writing {out / WEIGHTS_FILE}; the "
                                        "ServerApp failed (see the log above or `flwr log`)")
    return seconds
