"""Shared training pieces: sensor->model units through the runtime's own spec (one definition of
normalization for training and the device), classifier training, batched prediction."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from sensorveil.runtime.spec import TensorSpec, to_model_units
from sensorveil.sdk.datasets import SensorDataset

try:
    from tqdm.auto import tqdm
except ImportError:                      # progress bars are a nicety, never a requirement
    def tqdm(iterable=None, **_):
        return iterable


def progress_bar(iterable, desc: str, enabled: bool = True):
    """A progress bar on a terminal; nothing in logs, pipes and CI (tqdm's disable=None), where a bar
    redrawn per epoch would bury what the command prints."""
    return tqdm(iterable, desc=desc, leave=False, disable=None if enabled else True)


def model_shape(dataset: SensorDataset) -> tuple:
    """Per-sample model layout: vectors stay flat, images and depth get a channel axis."""
    shape = dataset.sample_shape
    return shape if dataset.modality == "vector" else (1,) + shape


def tensor_spec_dict(dataset: SensorDataset, name: str) -> dict:
    """The manifest's input/output spec for this dataset (sensor units + normalization)."""
    low, high = dataset.sensor_range
    return {"name": name, "sample_shape": list(dataset.sample_shape),
            "model_shape": [None] + list(model_shape(dataset)), "dtype": np.dtype(dataset.x.dtype).name,
            "sensor_range": [float(low), float(high)],
            "normalization": {"offset": float(low), "scale": float(high - low)}, "units": dataset.units}


def sensor_step(spec: dict) -> float:
    """The spacing of the values a sensor can emit, in model units: 1/scale for integer sensors
    (binary WiFi flags: 1, millimetres of depth: 1/range), 0 for float sensors (no grid)."""
    if np.dtype(spec["dtype"]).kind not in "ui":
        return 0.0
    return 1.0 / float(spec["normalization"]["scale"])


def snap_to_sensor(y: torch.Tensor, step: float) -> torch.Tensor:
    """Round to the sensor's value grid as the runtime does when it emits sensor units, with a
    straight-through gradient (Bengio, Leonard and Courville 2013: the rounding's derivative is taken
    as 1), so a mechanism trains on the very values its bundle will emit."""
    if step <= 0:
        return y
    return y + (torch.round(y / step) * step - y).detach()


def to_model(dataset: SensorDataset) -> torch.Tensor:
    spec = TensorSpec.from_manifest(tensor_spec_dict(dataset, "x"))
    return torch.from_numpy(to_model_units(dataset.x, spec))


def set_seed(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))


def batches(n: int, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = True):
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


LR_SCHEDULES = ("constant", "cosine")


def train_classifier(model: nn.Module, x: torch.Tensor, labels: np.ndarray, epochs: int = 20,
                     batch_size: int = 64, lr: float = 1e-3, desc: str = "classifier",
                     progress: bool = True, seed: int = 0, lr_schedule: str = "constant",
                     on_epoch=None) -> nn.Module:
    """Plain supervised training (Adam, cross-entropy); returns the model in eval mode.

    ``lr_schedule="cosine"`` anneals the learning rate from ``lr`` to 0 over the run, per step (Loshchilov
    and Hutter 2017, SGDR, eq. 5 without restarts): with a constant rate the held-out accuracy moves a
    point from epoch to epoch, and the last epoch is whichever point it lands on. ``on_epoch(model,
    epoch)`` is called after each epoch (a learning curve); the model is put back in training mode after."""
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}")
    y = torch.as_tensor(labels, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-5)
    steps = epochs * -(-len(x) // batch_size)
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))
                if lr_schedule == "cosine" else None)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in progress_bar(range(epochs), desc, progress):
        for idx in batches(len(x), batch_size, gen):
            optimizer.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            optimizer.step()
            if schedule is not None:
                schedule.step()
        if on_epoch is not None:
            on_epoch(model.eval(), epoch + 1)
            model.train()
    return model.eval()


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> np.ndarray:
    model.eval()
    return torch.cat([model(x[i:i + batch_size]).argmax(1) for i in range(0, len(x), batch_size)]).numpy()


@torch.no_grad()
def apply(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    model.eval()
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])


def accuracy(model: nn.Module, x: torch.Tensor, labels: np.ndarray) -> float:
    return float((predict(model, x) == np.asarray(labels)).mean())
