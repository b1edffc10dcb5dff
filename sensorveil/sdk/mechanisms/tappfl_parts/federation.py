"""Running a federation from train(): its spec, in Flower's simulation runtime or through `flwr run`
against a SuperLink, and the installed Flower's version."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from sensorveil.sdk import federated
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.mechanisms.tappfl_parts.bundle import FEATURE_FILE, pretrained_path
from sensorveil.sdk.mechanisms.tappfl_parts.config import TAPPFLConfig
from sensorveil.sdk.mechanisms.tappfl_parts.data import device_partitions

SIMULATION_APPS = "sensorveil.sdk.mechanisms.tappfl:simulation_apps"
SERVER_APP = "sensorveil.sdk.mechanisms.tappfl_parts.apps:server_app"   # module-level objects, as Flower requires
CLIENT_APP = "sensorveil.sdk.mechanisms.tappfl_parts.apps:client_app"


def federation_spec(data: SensorDataset, base: dict, useful: str, private: str, config: TAPPFLConfig,
                    out: Path) -> dict:
    model = {"input_dim": int(np.prod(base["model_shape"])), "representation_dim": int(config.representation_dim),
             "n_private": int(data.num_classes[private])}
    task = {"dataset": base["dataset"], "useful": useful, "private": private, "seed": int(config.seed),
            "partition": config.partition, "alpha": float(config.alpha), "partition_by": config.partition_by,
            "heldout": float(config.heldout), "model": model}
    settings = asdict(config)
    if config.pretrained:   # the ServerApp may run in another working directory (deployment)
        settings["pretrained"] = str(pretrained_path(config.pretrained).resolve())
    largest = max(len(part) for part in device_partitions(data, useful, private, config))
    return {"task": task, "config": settings, "num_clients": int(config.clients), "cpus": int(config.cpus),
            "limits": {"max_examples": int(config.max_examples or largest)}, "out_dir": str(Path(out).resolve())}


def federate(spec: dict, out: Path, config: TAPPFLConfig) -> float:
    """Run the federation the config names; returns its wall time in seconds."""
    (out / FEATURE_FILE).unlink(missing_ok=True)   # never read a feature extractor an earlier run left
    echo = (lambda line: "[tappfl]" in line) if config.progress else None
    if config.federation == "simulation":
        seconds = federated.simulate(SIMULATION_APPS, spec, out, config.timeout_s, echo=echo)
    elif config.federation == "deployment":
        if not config.superlink:
            raise ValueError("federation=deployment needs superlink=NAME, a SuperLink connection in "
                             "$FLWR_HOME/config.toml (README, TAPPFL)")
        app = federated.write_flower_app(out / "flower-app", SERVER_APP, CLIENT_APP, {"spec": json.dumps(spec)})
        started = time.time()
        federated.flwr_run(app, config.superlink, config.timeout_s, log_path=out / "flwr-run.log", echo=echo)
        seconds = time.time() - started
    else:
        raise ValueError(f"federation={config.federation!r}; expected 'simulation' or 'deployment'")
    if not (out / FEATURE_FILE).is_file():
        raise federated.FederationError(f"the federation finished without writing {out / FEATURE_FILE}; the "
                                        "ServerApp failed (see the log above or `flwr log`)")
    return seconds


def flower_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("flwr")
    except PackageNotFoundError:
        return "not installed"
