"""TAPPFL's files: the feature extractor and round history of a run directory, f read back from it (or
from a pre-trained one), and the representation output and pipeline entry a bundle carries."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from sensorveil.runtime.stages import REPRESENTATION
from sensorveil.runtime.stages.model import ModelEntry
from sensorveil.sdk.mechanisms.base import BundleParts
from sensorveil.sdk.mechanisms.tappfl_parts.model import feature_extractor
from sensorveil.sdk.rundir import RunRecord

FEATURE_FILE = "feature_extractor.pt"
HISTORY_FILE = "federation.json"


WEIGHTS_KEY = "weights_file"    # TAPPFL's section of run.json: the feature extractor's file in the run


def representation_spec(dim: int) -> dict:
    """The bundle's output: a feature vector in [-1, 1]^d (tanh), no sensor units, identity normalization."""
    return {"name": "y", "sample_shape": [dim], "model_shape": [None, dim], "dtype": "float32",
            "sensor_range": [-1.0, 1.0], "normalization": {"offset": 0.0, "scale": 1.0},
            "units": "representation"}


def load_feature_extractor(run_dir, run: RunRecord) -> nn.Module:
    f = feature_extractor(int(np.prod(run.model_shape)), int(run.config["representation_dim"]))
    f.load_state_dict(torch.load(Path(run_dir) / run.sections[WEIGHTS_KEY], weights_only=True))
    return f.eval()


def pretrained_path(value: str) -> Path:
    path = Path(value)
    path = path / FEATURE_FILE if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"pretrained={value!r}: expected a {FEATURE_FILE} or a tappfl run directory")
    return path


def bundle_entry(run: RunRecord, name: str, kind: str) -> BundleParts:
    """The bundle's pipeline entry for a run, and its one stage: the model, emitting the representation."""
    cfg = run.config
    entry = {"name": name, "kind": kind, "useful": run.useful, "private": run.private,
             "output": f"representation r = f(x), {cfg['representation_dim']} float32 values in [-1, 1]; "
                       "not sensor units",
             "parameters": {key: cfg[key] for key in ("lam", "privacy_bound", "representation_dim", "rounds",
                                                      "pretrain_rounds", "clients", "fraction", "participation",
                                                      "local_epochs", "batch_size", "lr", "partition", "alpha")}}
    return BundleParts(entry, [ModelEntry("model", emits=REPRESENTATION).to_manifest()])
