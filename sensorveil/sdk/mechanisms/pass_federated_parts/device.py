"""A device's side of pass-federated: the rows it holds (its part of PASS's training split) beside the
public substitute bank every device shares, and PASS's local training steps on f and g."""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms.pass_parts.data import PassData, prepare_data
from sensorveil.sdk.mechanisms.pass_parts.losses import pass_loss
from sensorveil.sdk.mechanisms.pass_parts.model import SubstitutionModel, make_embedding
from sensorveil.sdk.mechanisms.pass_parts.train import conditioned_out
from sensorveil.sdk.rundir import load_recorded_dataset
from sensorveil.sdk.training import batches


@dataclass
class DeviceData:
    """One device's rows (model units) and labels, and the bank's useful labels (public, eq. 7's U')."""
    x: torch.Tensor
    private: list          # one label tensor per private attribute
    useful: list
    bank_useful: list
    private_classes: list
    useful_classes: list
    excluded: torch.Tensor | None   # (rows, bank): True where the conditioned draw can never pick x'

    def __len__(self) -> int:
        return len(self.x)


def task_data(task: dict) -> PassData:
    """PASS's data of the task: the same split and bank (seeded) that central PASS and every device use."""
    dataset = load_recorded_dataset(task["dataset"])
    return prepare_data(dataset, task["useful"], task["private"], task["hidden"], task["substitutes"], task["seed"],
                        condition=task["condition"])


def partitions(data: PassData, task: dict) -> list[np.ndarray]:
    """The training rows of each device: TAPPFL's partition code (sdk.federated.partition_rows), IID,
    Dirichlet over an attribute, or one device per value of one (``partition_by``; default the first private
    attribute); deterministic in the seed, so every node computes it."""
    rows = data.train_rows
    by = task.get("partition_by") or data.private[0]
    if by not in data.dataset.attributes:
        raise ValueError(f"partition_by={by!r}: dataset {data.dataset.name!r} has no such attribute; expected one "
                         f"of {sorted(data.dataset.attributes)}")
    labels = data.labels(by)[rows]
    return federated.partition_rows(rows, labels, int(task["clients"]), task["partition"], float(task["alpha"]),
                                    int(task["seed"]))


@functools.lru_cache(maxsize=32)   # every device a worker serves (UJIIndoorLoc: one per user, about 20)
def device_data(task_json: str, partition: int) -> DeviceData:
    """The rows of device ``partition`` (cached: a Ray worker serves many devices over many rounds)."""
    task = json.loads(task_json)
    data = task_data(task)
    rows = partitions(data, task)[partition]
    tensor = lambda attr, idx: torch.as_tensor(data.labels(attr)[idx], dtype=torch.long)  # noqa: E731
    return DeviceData(x=data.x[rows], private=[tensor(a, rows) for a in data.private],
                      useful=[tensor(a, rows) for a in data.useful],
                      bank_useful=[tensor(a, data.bank_rows) for a in data.useful],
                      private_classes=[data.classes(a) for a in data.private],
                      useful_classes=[data.classes(a) for a in data.useful], excluded=conditioned_out(data, rows))


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
