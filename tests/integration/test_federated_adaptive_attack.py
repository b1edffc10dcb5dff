"""An adaptive malicious device against the norm bound that follows the honest updates, through Flower's
deployment transport: one SuperLink and five SuperNodes as processes on 127.0.0.1 over TLS, each run a `flwr
run` of TAPPFL's ServerApp with the ClientApp of tests/integration/adaptive_client.py. Each round the attacker
(the node started with ``attacker=1``) trains honestly, then replaces its update by a fixed direction of its
choosing, scaled to just under the bound it can predict: ``norm_multiple`` times its own honest step (the
round's median is an honest step while most devices are honest). Over several rounds it is never dropped, yet
the global model stays near the honest-only model; with the checks off the same attacker, unbounded, drags the
model away."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms import tappfl
from tests.integration.test_federated_defence import spec_for

pytestmark = [pytest.mark.boots, pytest.mark.trains]

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

CLIENT_APP = "tests.integration.adaptive_client:client_app"
CHECKOUT = Path(__file__).resolve().parents[2]
ATTACKER, CLIENTS, ROUNDS, MULTIPLE = 0, 5, 3, 2.0
RUN_TIMEOUT_S = 300


def node_configs() -> list:
    return [f"partition-id={i} num-partitions={CLIENTS}" + (" attacker=1" if i == ATTACKER else "")
            for i in range(CLIENTS)]


def run(federation, out: Path, step_multiple: float, **settings) -> tuple[dict, list]:
    """One `flwr run` on the running federation; (the global f it wrote, its round history)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = spec_for(out, {}, clients=CLIENTS, rounds=ROUNDS, **settings)
    config = {"spec": json.dumps(spec), "attack-step-multiple": float(step_multiple)}
    app = federated.write_flower_app(out / "flower-app", tappfl.SERVER_APP, CLIENT_APP, config)
    federated.flwr_run(app, federation.name, RUN_TIMEOUT_S, flwr_home=federation.home, log_path=out / "flwr-run.log")
    model = {k: v.numpy() for k, v in torch.load(out / tappfl.FEATURE_FILE, weights_only=True).items()}
    return model, json.loads((out / tappfl.HISTORY_FILE).read_text())


def distance(a: dict, b: dict) -> float:
    return math.sqrt(sum(float(np.sum(np.square(a[k].astype(np.float64) - b[k]))) for k in a))


@pytest.mark.slow
@pytest.mark.attack
def test_an_adaptive_client_just_under_the_norm_bound_does_not_take_over_the_global_model(tmp_path, monkeypatch):
    from sensorveil.sdk.federated.certs import write_certificates
    # the SuperNodes' ClientApp processes import the attacker's module from this checkout
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    home = tmp_path / "flwr-home"
    with federated.LoopbackFederation(home, node_configs(), tls=write_certificates(tmp_path / "certs")) as federation:
        honest, _ = run(federation, tmp_path / "honest", 0.0, norm_multiple=MULTIPLE)   # every device honest
        # its own honest step runs up to a third above the round median here, so 0.6 x the multiple keeps it under
        bounded, history = run(federation, tmp_path / "bounded", 0.6 * MULTIPLE, norm_multiple=MULTIPLE)
        unbounded, _ = run(federation, tmp_path / "unbounded", 100.0, norm_multiple=0.0, max_update_ratio=0.0)
    assert [(entry["devices"], entry["dropped"]) for entry in history] == [(CLIENTS, [])] * ROUNDS   # never caught
    figures = {"honest_training_moved": distance(honest, initial_model(tmp_path)),
               "bounded_attack": distance(bounded, honest), "unbounded_attack": distance(unbounded, honest)}
    print("adaptive attack over TLS loopback, distance of the global model from the honest-only run:",
          json.dumps(figures))
    assert figures["bounded_attack"] < 0.1 * figures["unbounded_attack"]
    assert figures["bounded_attack"] < figures["honest_training_moved"]   # less than training itself moved it


def initial_model(tmp_path) -> dict:
    spec = spec_for(tmp_path / "start", {}, clients=CLIENTS, rounds=ROUNDS)
    return {k: v.detach().numpy() for k, v in tappfl.initial_feature_extractor(spec).state_dict().items()}
