"""The rows each device holds: slices 1+2 of the shared protocol, partitioned over the devices (IID or
Dirichlet), or a node's own dataset; each device trains on part of its rows and keeps the rest held out
for the paper's inference accuracy."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import numpy as np
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import dataset_slices
from sensorveil.sdk.mechanisms.tappfl_parts.config import TAPPFLConfig
from sensorveil.sdk.rundir import load_recorded_dataset
from sensorveil.sdk.training import to_model

# Rows a device holds at the paper's scale: Adult's 32,561 rows over its 100 devices (setup, tappfl.md
# line 201; appendix B, line 591). config.py's `clients` says why this one and not CIFAR-10's 600.
PAPER_ROWS_PER_DEVICE = 32561 / 100


@dataclass
class DeviceData:
    x: torch.Tensor          # the rows DeviceUpdate trains on
    u: torch.Tensor
    n_private: int
    x_heldout: torch.Tensor  # rows the device never trains on: the paper's inference accuracy is scored here
    u_heldout: torch.Tensor


def paper_scale_clients(n_rows: int) -> int:
    """Devices for ``n_rows`` training rows so each holds about as many as the paper's devices (2 at least)."""
    return max(2, round(n_rows / PAPER_ROWS_PER_DEVICE))


def heldout_split(rows: np.ndarray, share: float, seed: int, device: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows) of one device: a seeded draw of round(share * n) of its rows (1 at
    least) is held out, as appendix B's 80% / 20% split of each dataset, here within each device so
    its held-out rows follow its own (possibly non-IID) distribution."""
    rows = np.asarray(rows)
    n_held = max(1, round(share * len(rows)))
    if len(rows) - n_held < 2:
        raise ValueError(f"device {device} holds {len(rows)} rows: holding {n_held} out leaves fewer than 2 to "
                         "train on; expected fewer devices or a smaller heldout")
    order = np.random.default_rng([seed, 2024, device]).permutation(len(rows))
    return np.sort(rows[order[n_held:]]), np.sort(rows[order[:n_held]])


def training_rows(data: SensorDataset, useful: str, private: str, seed: int) -> np.ndarray:
    """The rows devices learn from: slices 1+2 of the shared three-slice protocol (evaluation.dataset_slices,
    which keeps a dataset's own test split), so slice 3 stays unseen and every mechanism is scored on the same
    test rows. The useful labels only place rows in slices; no device ever trains on them (TAPPFL is
    task-agnostic)."""
    slices = dataset_slices(data, useful, private, seed)
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
    train, held = heldout_split(rows, float(task["heldout"]), task["seed"], int(node.get("partition-id", 0)))
    private = data.attributes[task["private"]]
    return DeviceData(x=to_model(data.subset(train)), u=torch.as_tensor(private[train], dtype=torch.long),
                      n_private=int(task["model"]["n_private"]), x_heldout=to_model(data.subset(held)),
                      u_heldout=torch.as_tensor(private[held], dtype=torch.long))


def device_partitions(data: SensorDataset, useful: str, private: str, config: TAPPFLConfig) -> list:
    """The rows of each simulated (or partition-id) device, as every node computes them."""
    rows = training_rows(data, useful, private, config.seed)
    labels = data.attributes[config.partition_by or private]
    return federated.partition_rows(rows, labels[rows], config.clients, config.partition, config.alpha, config.seed)


def partition_record(data: SensorDataset, useful: str, private: str, config: TAPPFLConfig) -> dict:
    labels = data.attributes[config.partition_by or private]
    parts = device_partitions(data, useful, private, config)
    held = [len(heldout_split(part, config.heldout, config.seed, i)[1]) for i, part in enumerate(parts)]
    return {"scheme": config.partition, "alpha": config.alpha if config.partition == "dirichlet" else None,
            "by": config.partition_by or private, **federated.partition_summary(parts, lambda p: labels[p]),
            "heldout": {"share": config.heldout, "rows": int(sum(held)), "min_per_device": int(min(held)),
                        "max_per_device": int(max(held))}}
