"""A device's side of pass-federated: the rows it holds, read from its own folder (folders.py), beside
the bank's labels the server sends with every round (the bank itself is server-held: bank.py), and PASS's
local training steps on f and g."""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sensorveil.runtime.stages.substitution import restrict_to_known
from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms.pass_federated_parts.folders import device_folder, read_device_folder
from sensorveil.sdk.mechanisms.pass_parts.data import PassData
from sensorveil.sdk.mechanisms.pass_parts.losses import pass_loss
from sensorveil.sdk.mechanisms.pass_parts.model import SubstitutionModel, make_embedding
from sensorveil.sdk.training import batches


@dataclass
class DeviceData:
    """One device's rows (model units) and labels, and the bank's useful labels (server-held, eq. 7's U')."""
    x: torch.Tensor
    private: list          # one label tensor per private attribute
    useful: list
    bank_useful: list
    private_classes: list
    useful_classes: list
    excluded: torch.Tensor | None   # (rows, bank): True where the conditioned draw can never pick x'

    def __len__(self) -> int:
        return len(self.x)


def partitions(data: PassData, task: dict, rows: np.ndarray) -> list[np.ndarray]:
    """The rows of each device, from ``rows`` (the training rows no server set holds): TAPPFL's partition
    code (sdk.federated.partition_rows), IID, Dirichlet over an attribute, or one device per value of one
    (``partition_by``; default the first private attribute); deterministic in the seed."""
    by = task.get("partition_by") or data.private[0]
    if by not in data.dataset.attributes:
        raise ValueError(f"partition_by={by!r}: dataset {data.dataset.name!r} has no such attribute; expected one "
                         f"of {sorted(data.dataset.attributes)}")
    labels = data.labels(by)[rows]
    return federated.partition_rows(rows, labels, int(task["clients"]), task["partition"], float(task["alpha"]),
                                    int(task["seed"]))


def node_folder(task: dict, node_config, partition: int) -> Path:
    """The folder this node reads: its node config's data-path (a deployed SuperNode), else its partition's
    folder under the task's devices folder (a simulated node)."""
    if "data-path" in node_config:
        return Path(str(node_config["data-path"]))
    return device_folder(task["devices_dir"], partition)


@functools.lru_cache(maxsize=32)   # every device a worker serves (UJIIndoorLoc: one per user, about 20)
def device_data(task_json: str, folder: str) -> DeviceData:
    """The rows in ``folder`` (this device's own, and nothing else), with the bank's labels from the task
    (cached: a Ray worker serves many devices over many rounds)."""
    task = json.loads(task_json)
    arrays = read_device_folder(folder)
    labels = lambda prefix, n: [torch.as_tensor(arrays[f"{prefix}_{i}"], dtype=torch.long)  # noqa: E731
                                for i in range(n)]
    bank, classes = task["bank"], task["classes"]
    excluded = None
    if bank.get("condition") is not None:   # the device restricts the draw to substitutes sharing what it knows
        ones = np.ones((len(arrays["x"]), len(bank["condition"])))
        excluded = torch.as_tensor(restrict_to_known(ones, np.asarray(bank["condition"]), arrays["known"]) == 0)
    return DeviceData(x=torch.as_tensor(arrays["x"]), private=labels("private", len(classes["private"])),
                      useful=labels("useful", len(classes["useful"])),
                      bank_useful=[torch.as_tensor(u, dtype=torch.long) for u in bank["useful"]],
                      private_classes=list(classes["private"]), useful_classes=list(classes["useful"]),
                      excluded=excluded)


def build_model(model: dict) -> SubstitutionModel:
    """f and g as the task's model record describes them (weights come from the server)."""
    return SubstitutionModel(make_embedding(model["modality"], tuple(model["model_shape"]), model["embedding_dim"]),
                             model["bank_size"], model["embedding_dim"], model["tau"])


def cosine_lr(lr: float, step: int, total: int) -> float:
    """Table 6's cosine schedule (torch's CosineAnnealingLR, eta_min 0) in closed form at ``step`` of ``total``."""
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))


def local_update(model: SubstitutionModel, data: DeviceData, settings: dict, server_round: int,
                 generator: torch.Generator) -> dict:
    """PASS's training steps (central PASS's ``fit``: eq. 2 then the loss of eq. 3 with eq. 4-8's terms,
    AdamW) for ``local_epochs`` over this device's rows. The optimiser is fresh each round (its moments
    stay on no device between rounds); the learning rate follows one cosine schedule over the whole
    federation, each step at its place in it. Returns the last epoch's mean loss terms."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"])
    per_round = settings["local_epochs"] * math.ceil(len(data) / settings["batch_size"])
    step, total = (server_round - 1) * per_round, settings["rounds"] * per_round
    model.train()
    sums, count = {}, 0
    for _ in range(settings["local_epochs"]):
        sums, count = {}, 0
        for idx in batches(len(data), settings["batch_size"], generator):
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(settings["lr"], step, total)
            log_p = model(data.x[idx])                                   # log P(X'|X), eq. 2
            if data.excluded is not None:   # renormalized over the substitutes the draw may pick
                log_p = F.log_softmax(log_p.masked_fill(data.excluded[idx], -1e4), dim=1)
            loss, parts = pass_loss(log_p, [s[idx] for s in data.private], data.private_classes,
                                    [u[idx] for u in data.useful], data.bank_useful, data.useful_classes,
                                    settings["lam"], settings["mu"])    # eq. 3
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
            count += 1
    return {k: v / max(count, 1) for k, v in sums.items()}
