"""The rows each device trains on: slices 1+2 of the shared protocol, partitioned over the devices
(IID or Dirichlet), or a node's own dataset."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import numpy as np
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import make_slices
from sensorveil.sdk.mechanisms.tappfl_parts.config import TAPPFLConfig
from sensorveil.sdk.rundir import load_recorded_dataset
from sensorveil.sdk.training import to_model


@dataclass
class DeviceData:
    x: torch.Tensor
    u: torch.Tensor
    n_private: int


def training_rows(data: SensorDataset, useful: str, private: str, seed: int) -> np.ndarray:
    """The rows devices learn from: slices 1+2 of the shared three-slice protocol (evaluation.make_slices),
    so slice 3 stays unseen and every mechanism is scored on the same test rows. The useful labels only
    place rows in slices; no device ever trains on them (TAPPFL is task-agnostic)."""
    slices = make_slices(data.attributes[useful], data.attributes[private], data.num_classes[private], seed)
    return np.concatenate([slices["classifiers"], slices["generator_train"], slices["generator_val"]])


@functools.lru_cache(maxsize=4)
def device_data(task_json: str, node_json: str) -> DeviceData:
    """This device's rows. A simulated or loopback node names its part of the shared dataset
    (node config partition-id / num-partitions); a node with its own data names it
    (node config dataset, data-path) and trains on all of it. Cached: a Ray worker serves many rounds."""
    task, node = json.loads(task_json), json.loads(node_json)
    if "dataset" in node:
        data = load_recorded_dataset({"name": node["dataset"], "path": node.get("data-path"), "options": {}})
        rows = np.arange(len(data))
    else:
        data = load_recorded_dataset(task["dataset"])
        rows = training_rows(data, task["useful"], task["private"], task["seed"])
    if "partition-id" in node:
        by = task["partition_by"] or task["private"]
        parts = federated.partition_rows(rows, data.attributes[by][rows], int(node["num-partitions"]),
                                         task["partition"], task["alpha"], task["seed"])
        rows = parts[int(node["partition-id"])]
    private = data.attributes[task["private"]][rows]
    return DeviceData(x=to_model(data.subset(rows)), u=torch.as_tensor(private, dtype=torch.long),
                      n_private=int(task["model"]["n_private"]))


def device_partitions(data: SensorDataset, useful: str, private: str, config: TAPPFLConfig) -> list:
    """The rows of each simulated (or partition-id) device, as every node computes them."""
    rows = training_rows(data, useful, private, config.seed)
    labels = data.attributes[config.partition_by or private]
    return federated.partition_rows(rows, labels[rows], config.clients, config.partition, config.alpha, config.seed)


def partition_record(data: SensorDataset, useful: str, private: str, config: TAPPFLConfig) -> dict:
    labels = data.attributes[config.partition_by or private]
    parts = device_partitions(data, useful, private, config)
    return {"scheme": config.partition, "alpha": config.alpha if config.partition == "dirichlet" else None,
            "by": config.partition_by or private, **federated.partition_summary(parts, lambda p: labels[p])}
