"""An adaptive malicious device against the norm bound that follows the honest updates, through Flower's
simulation engine (the runtime test_tappfl uses; the SuperLink/SuperNode processes would add minutes a run
and the same server code). Each round the attacker trains honestly, then replaces its update by a fixed
direction of its choosing, scaled to just under the bound it can predict: ``norm_multiple`` times its own
honest step (the round's median is an honest step while most devices are honest). Over several rounds it
is never dropped, yet the global model stays near the honest-only model; with the checks off the same
attacker, unbounded, drags the model away."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms import tappfl
from tests.integration.test_federated_defence import spec_for

pytestmark = [pytest.mark.boots, pytest.mark.trains]

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

ADAPTIVE_APPS = "tests.integration.test_federated_adaptive_attack:adaptive_apps"
ATTACKER, CLIENTS, ROUNDS, MULTIPLE = 0, 5, 3, 2.0


def attack_direction(arrays: dict) -> dict:
    """The attacker's fixed target direction, unit norm over the whole model."""
    rng = np.random.default_rng(2024)
    direction = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in arrays.items()}
    norm = math.sqrt(sum(float(np.sum(np.square(d))) for d in direction.values()))
    return {k: d / norm for k, d in direction.items()}


def adaptive_apps(spec: dict):
    """TAPPFL's ServerApp and a ClientApp whose device ``spec["attack"]["partition"]`` sends global +
    ``spec["attack"]["step_multiple"]`` x (its own honest step's norm) x the attack direction (None: honest)."""
    from flwr.app import Array, ArrayRecord, Message, RecordDict
    from flwr.clientapp import ClientApp
    server, _ = tappfl.simulation_apps(spec)
    client, attack = ClientApp(), spec["attack"]

    @client.train()
    def train(msg, context):
        reply = tappfl.device_train(msg, context)
        if attack["step_multiple"] is None or int(context.node_config["partition-id"]) != attack["partition"]:
            return reply
        start = {k: v.numpy() for k, v in msg.content["arrays"].items()}
        honest = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        step = math.sqrt(sum(float(np.sum(np.square(honest[k] - start[k]))) for k in start))
        sent = {k: start[k] + attack["step_multiple"] * step * d for k, d in attack_direction(start).items()}
        arrays = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in sent.items()})
        return Message(content=RecordDict({"arrays": arrays, "metrics": reply.content["metrics"]}), reply_to=msg)

    client.evaluate()(tappfl.device_evaluate)
    return server, client


def run(out, step_multiple, **settings) -> tuple[dict, list]:
    out.mkdir(parents=True, exist_ok=True)
    spec = spec_for(out, {}, clients=CLIENTS, rounds=ROUNDS, **settings)
    spec["attack"] = {"partition": ATTACKER, "step_multiple": step_multiple}
    federated.simulate(ADAPTIVE_APPS, spec, out, timeout_s=400, flwr_home=out / "flwr-home")
    model = {k: v.numpy() for k, v in torch.load(out / tappfl.FEATURE_FILE, weights_only=True).items()}
    return model, json.loads((out / tappfl.HISTORY_FILE).read_text())


def distance(a: dict, b: dict) -> float:
    return math.sqrt(sum(float(np.sum(np.square(a[k].astype(np.float64) - b[k]))) for k in a))


@pytest.mark.slow
@pytest.mark.attack
def test_an_adaptive_client_just_under_the_norm_bound_does_not_take_over_the_global_model(tmp_path):
    honest, _ = run(tmp_path / "honest", None, norm_multiple=MULTIPLE)   # every device honest
    # its own honest step runs up to a third above the round median here, so 0.6 x the multiple keeps it under
    bounded, history = run(tmp_path / "bounded", 0.6 * MULTIPLE, norm_multiple=MULTIPLE)
    unbounded, _ = run(tmp_path / "unbounded", 100.0, norm_multiple=0.0, max_update_ratio=0.0)   # checks off
    assert all(entry["devices"] == CLIENTS and entry["dropped"] == [] for entry in history)   # never caught
    figures = {"honest_training_moved": distance(honest, initial_model(tmp_path)),
               "bounded_attack": distance(bounded, honest), "unbounded_attack": distance(unbounded, honest)}
    print("adaptive attack, distance of the global model from the honest-only run:", json.dumps(figures))
    assert figures["bounded_attack"] < 0.1 * figures["unbounded_attack"]
    assert figures["bounded_attack"] < figures["honest_training_moved"]   # less than training itself moved it


def initial_model(tmp_path) -> dict:
    spec = spec_for(tmp_path / "start", {}, clients=CLIENTS, rounds=ROUNDS)
    return {k: v.detach().numpy() for k, v in tappfl.initial_feature_extractor(spec).state_dict().items()}
