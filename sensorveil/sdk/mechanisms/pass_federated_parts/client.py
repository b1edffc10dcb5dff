"""The ClientApp's train handler: the global f and g in, PASS's local steps on the rows of this device's own
folder, f and g back (the only thing that leaves the device, with its row count and mean loss terms).
flwr is imported where it is needed (the federated extra)."""
from __future__ import annotations

import json

import numpy as np
import torch

from sensorveil.sdk.mechanisms.pass_federated_parts.device import build_model, device_data, local_update, node_folder
from sensorveil.sdk.mechanisms.tappfl_parts.client import node_identity

SETTINGS = {"lam": float, "mu": float, "lr": float, "weight-decay": float, "local-epochs": int, "batch-size": int,
            "rounds": int}


def round_settings(config) -> dict:
    """The server's config record for one round, as local_update reads it."""
    return {key.replace("-", "_"): kind(config[key]) for key, kind in SETTINGS.items()}


def round_generator(task: dict, partition: int, server_round: int) -> torch.Generator:
    """The device's batch order this round: seeded, and the same in every process."""
    words = [task["seed"], partition, server_round, 17]
    return torch.Generator().manual_seed(int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1))


def device_train(msg, context):
    """@client_app.train(): load the global f, g; PASS's local steps; send f, g and the loss terms back."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    torch.set_num_threads(1)
    config = msg.content["config"]
    task = json.loads(str(config["task"]))
    partition = node_identity(context)
    data = device_data(str(config["task"]), str(node_folder(task, context.node_config, partition)))
    model = build_model(task["model"])
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    server_round = int(config["server-round"])
    figures = local_update(model, data, round_settings(config), server_round,
                           round_generator(task, partition, server_round))
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"num-examples": len(data), **figures})})
    return Message(content=content, reply_to=msg)
