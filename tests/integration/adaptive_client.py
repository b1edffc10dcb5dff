"""The ClientApp of test_federated_adaptive_attack's deployment: TAPPFL's own device handlers, except on the
node whose node config says ``attacker=1``. That device trains honestly, then sends instead global +
``attack-step-multiple`` x (its own honest step's norm) x a fixed unit direction of its choosing: the largest
update it can predict the norm bound lets through, pointed where it wants the model to go.

The multiple rides in the run config (0: send the honest update), so one SuperLink and its SuperNodes serve
the honest, bounded and unbounded runs. Flower reads ``client_app`` from this file's source, so it stays a
module-level object; SuperNodes import this module through PYTHONPATH (the test puts the checkout on it)."""
from __future__ import annotations

import math

import numpy as np
from flwr.app import Array, ArrayRecord, Message, RecordDict
from flwr.clientapp import ClientApp

from sensorveil.sdk.federated.apps import protection_mods
from sensorveil.sdk.mechanisms import tappfl

DIRECTION_SEED = 2024


def attack_direction(arrays: dict) -> dict:
    """The attacker's fixed target direction, unit norm over the whole model."""
    rng = np.random.default_rng(DIRECTION_SEED)
    direction = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in arrays.items()}
    norm = math.sqrt(sum(float(np.sum(np.square(d))) for d in direction.values()))
    return {k: d / norm for k, d in direction.items()}


def train(msg, context):
    reply = tappfl.device_train(msg, context)
    multiple = float(context.run_config.get("attack-step-multiple", 0.0))
    if multiple <= 0 or int(context.node_config.get("attacker", 0)) != 1:
        return reply
    start = {k: v.numpy() for k, v in msg.content["arrays"].items()}
    honest = {k: v.numpy() for k, v in reply.content["arrays"].items()}
    step = math.sqrt(sum(float(np.sum(np.square(honest[k] - start[k]))) for k in start))
    sent = {k: start[k] + multiple * step * d for k, d in attack_direction(start).items()}
    arrays = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in sent.items()})
    return Message(content=RecordDict({"arrays": arrays, "metrics": reply.content["metrics"]}), reply_to=msg)


client_app = ClientApp(mods=protection_mods())
client_app.train()(train)
client_app.evaluate()(tappfl.device_evaluate)
