"""The ClientApp's handlers: a device's inputs for a round (its data, the global f and its own g, h
kept in the node's state), DeviceUpdate for @app.train, and for @app.evaluate the paper's inference
accuracy (own g, held-out rows) beside the local attack probe. flwr is imported where it is needed (the
federated extra)."""
from __future__ import annotations

import copy
import json

import numpy as np
import torch

from sensorveil.sdk.mechanisms.tappfl_parts.config import PHASES, LocalSettings
from sensorveil.sdk.mechanisms.tappfl_parts.data import device_data
from sensorveil.sdk.mechanisms.tappfl_parts.device import device_update, local_attack_probe, paper_inference_accuracy
from sensorveil.sdk.mechanisms.tappfl_parts.model import DeviceNetworks

STATE_KEYS = {"g": "tappfl.g_psi", "h": "tappfl.h_omega"}   # the device's own networks, kept across rounds
UPDATES_KEY = "tappfl.updates"   # how many DeviceUpdates this device has run, by phase


def updates_done(context) -> dict:
    """{phase: DeviceUpdates this device has run}, from the node's state."""
    record = context.state[UPDATES_KEY] if UPDATES_KEY in context.state else {}
    return {phase: int(record[phase]) if phase in record else 0 for phase in PHASES}


def node_identity(context) -> int:
    return int(context.node_config.get("partition-id", context.node_id % (2**31)))


def device_inputs(msg, context):
    """(task, settings, data, networks with the global f and this device's own g, h)."""
    config = msg.content["config"]
    task = json.loads(str(config["task"]))
    node = {key: value for key, value in context.node_config.items()
            if key in ("partition-id", "num-partitions", "dataset", "data-path")}
    data = device_data(str(config["task"]), json.dumps(node, sort_keys=True))
    nets = DeviceNetworks.build(task["model"], seed=task["seed"] * 7919 + node_identity(context))
    nets.f.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    for name, key in STATE_KEYS.items():
        if key in context.state:
            getattr(nets, name).load_state_dict(context.state[key].to_torch_state_dict())
    return task, LocalSettings.from_config(config), data, nets


def round_generator(task: dict, context, config) -> torch.Generator:
    """The device's batch order and negatives for this round: seeded, and the same in every process."""
    words = [task["seed"], node_identity(context), int(config["server-round"]), PHASES.index(str(config["phase"]))]
    return torch.Generator().manual_seed(int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1))


def device_train(msg, context):
    """@client_app.train(): DeviceUpdate; only f goes back to the server, g and h stay on the device."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    torch.set_num_threads(1)
    task, settings, data, nets = device_inputs(msg, context)
    figures = device_update(nets, data.x, data.u, data.n_private, settings,
                            round_generator(task, context, msg.content["config"]))
    for name, key in STATE_KEYS.items():
        context.state[key] = ArrayRecord(getattr(nets, name).state_dict())
    done = updates_done(context)
    done[settings.phase] += 1
    context.state[UPDATES_KEY] = MetricRecord(done)
    content = RecordDict({"arrays": ArrayRecord(nets.f.state_dict()),
                          "metrics": MetricRecord({"num-examples": len(data.x), **figures,
                                                   "device_updates": done[settings.phase]})})
    return Message(content=content, reply_to=msg)


def device_evaluate(msg, context):
    """@client_app.evaluate(), on the global f after the round's aggregation: the paper's inference
    accuracy (this device's own g on its held-out rows), the local attack probe (a refitted copy of g),
    and how many DeviceUpdates the device has run in this phase. num-examples is the held-out count,
    so the server's mean weighs devices by their held-out rows (equal sizes under IID: the plain mean)."""
    from flwr.app import Message, MetricRecord, RecordDict
    torch.set_num_threads(1)
    task, settings, data, nets = device_inputs(msg, context)
    paper = paper_inference_accuracy(nets.f, nets.g, data.x_heldout, data.u_heldout)
    figures = local_attack_probe(nets.f, copy.deepcopy(nets.g), data, settings,
                                 round_generator(task, context, msg.content["config"]))
    metrics = {"num-examples": len(data.x_heldout), "paper_inference_acc": paper, **figures,
               "device_updates": updates_done(context)[settings.phase]}
    return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
