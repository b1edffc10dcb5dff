"""A training run on disk: run.json (what was trained, on what, with which figures) plus weights.

Weights are torch state dicts loaded with ``weights_only=True``, so reading a run never
unpickles arbitrary objects. Everything else is JSON a person can read. Mechanism modules read and
write runs through this module only, so none of them depends on the generic ``runs`` module.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sensorveil import __version__
from sensorveil.sdk.datasets import SensorDataset, load_dataset
from sensorveil.sdk.training import model_shape, tensor_spec_dict

RUN_FILE = "run.json"


def dataset_record(name: str, path, options: dict | None) -> dict:
    return {"name": name, "path": str(path) if path else None, "options": options or {}}


def load_recorded_dataset(record: dict) -> SensorDataset:
    return load_dataset(record["name"], record.get("path"), **record.get("options", {}))


def base_record(mechanism: str, data: SensorDataset, record: dict, useful, private, seed: int) -> dict:
    """The run.json keys every mechanism shares (what export, evaluate and benchmarks read)."""
    return {"sensorveil_version": __version__, "mechanism": mechanism, "useful": useful, "private": private,
            "dataset": record, "modality": data.modality, "model_shape": list(model_shape(data)),
            "input": tensor_spec_dict(data, "x"), "output": tensor_spec_dict(data, "y"), "seed": seed}


def write_run(out: Path, run: dict) -> Path:
    (Path(out) / RUN_FILE).write_text(json.dumps(run, indent=2, default=json_default))
    return Path(out)


def read_run(run_dir) -> dict:
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"expected a run directory with {RUN_FILE}, got {run_dir}")
    return json.loads(path.read_text())


def json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
