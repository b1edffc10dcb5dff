"""A training run on disk: run.json (what was trained, on what, with which figures) plus weights.

Weights are torch state dicts loaded with ``weights_only=True``, so reading a run never
unpickles arbitrary objects. Everything else is JSON a person can read. Mechanism modules read and
write runs through this module only, so none of them depends on the generic ``runs`` module.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from sensorveil import __version__
from sensorveil.sdk.datasets import SensorDataset, load_dataset
from sensorveil.sdk.training import model_shape, tensor_spec_dict

RUN_FILE = "run.json"


class RunRecordError(ValueError):
    """A run.json that is not a run record; the message names the file and the field."""


@dataclass
class RunDataset:
    """run.json's "dataset": what load_dataset is called with to get the run's data back."""
    name: str
    path: str | None = None
    options: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "path": self.path, "options": dict(self.options)}

    @classmethod
    def from_json(cls, value, where: str = RUN_FILE) -> RunDataset:
        if isinstance(value, RunDataset):
            return value
        value = need(where, "dataset", value, dict, "an object with a name")
        return cls(name=need(where, "dataset.name", value.get("name"), str, "a dataset name"),
                   path=need(where, "dataset.path", value.get("path"), (str, type(None)), "a path or null"),
                   options=need(where, "dataset.options", value.get("options", {}), dict, "an object"))


@dataclass
class RunRecord:
    """run.json: the fields every mechanism shares, read by attribute (export, evaluate, the CLI, benchmarks).
    ``sections`` holds the rest, each owned by the mechanism that writes it and read through that mechanism's
    own reader (PASS's substitution: pass_parts.bundle.substitution_of). The optional shared fields are None
    where a run has none and are then left out of the file, so a record reads back as it was written."""
    sensorveil_version: str
    mechanism: str
    useful: str | list
    private: str | list
    dataset: RunDataset
    modality: str
    model_shape: tuple
    input: dict
    output: dict
    seed: int
    kind: str | None = None
    config: dict | None = None
    reference: dict | None = None
    metrics: dict | None = None
    selection: dict | None = None
    train_seconds: float | None = None
    sections: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        shared = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "sections"}
        shared.update(dataset=self.dataset.to_json(), model_shape=list(self.model_shape))
        return {**{key: value for key, value in shared.items() if value is not None or key not in OPTIONAL},
                **self.sections}

    @classmethod
    def from_json(cls, data, where: str = RUN_FILE) -> RunRecord:
        """The record of a run.json's contents; RunRecordError naming the first missing or malformed field."""
        data = need(where, "run record", data, dict, "a JSON object")
        missing = [item.name for item in fields(cls) if item.name not in OPTIONAL and item.name != "sections"
                   and item.name not in data]
        if missing:
            raise RunRecordError(f"{where}: field {missing[0]!r} is missing; a run record has "
                                 f"{', '.join(REQUIRED)}")
        values = {key: need(where, key, data.get(key), kinds, what) for key, (kinds, what) in FIELD_TYPES.items()
                  if key in data and not (key in OPTIONAL and data[key] is None)}
        if not all(isinstance(size, int) and not isinstance(size, bool) for size in values["model_shape"]):
            raise RunRecordError(f"{where}: field 'model_shape' is {values['model_shape']!r}; expected whole numbers")
        values.update(dataset=RunDataset.from_json(data["dataset"], where), model_shape=tuple(values["model_shape"]))
        return cls(**values, sections={key: value for key, value in data.items() if key not in FIELD_TYPES})

    # read-only mapping access to the file's fields, for code that still reads run.json by key (scripts/,
    # mechanisms outside this package); sensorveil itself reads attributes
    def __getitem__(self, key):
        return self.to_json()[key]

    def get(self, key, default=None):
        return self.to_json().get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.to_json()

    def keys(self):
        return self.to_json().keys()

    def items(self):
        return self.to_json().items()

    def __iter__(self):
        return iter(self.to_json())


NUMBER = (int, float)
FIELD_TYPES = {   # field: (JSON types, what it must be), in run.json's order
    "sensorveil_version": (str, "a version string"), "mechanism": (str, "a mechanism name"),
    "useful": ((str, list), "an attribute or a list of them"), "private": ((str, list), "an attribute or a list"),
    "dataset": (dict, "an object with a name"), "modality": (str, "a modality name"),
    "model_shape": (list, "a list of whole numbers"), "input": (dict, "a tensor spec"),
    "output": (dict, "a tensor spec"), "seed": (int, "a whole number"), "kind": (str, "a mechanism kind"),
    "config": (dict, "an object"), "reference": (dict, "an object"), "metrics": (dict, "an object"),
    "selection": (dict, "an object"), "train_seconds": (NUMBER, "a number of seconds"),
}
OPTIONAL = ("kind", "config", "reference", "metrics", "selection", "train_seconds")
REQUIRED = tuple(key for key in FIELD_TYPES if key not in OPTIONAL)


def need(where: str, name: str, value, kinds, what: str):
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)) or \
            not isinstance(value, kinds):
        raise RunRecordError(f"{where}: field {name!r} is {value!r}; expected {what}")
    return value


def dataset_record(name: str, path, options: dict | None) -> dict:
    return RunDataset(name, str(path) if path else None, options or {}).to_json()


def load_recorded_dataset(record) -> SensorDataset:
    """The run's data, from its RunDataset (or run.json's "dataset" object)."""
    dataset = RunDataset.from_json(record)
    return load_dataset(dataset.name, dataset.path, **dataset.options)


def base_record(mechanism: str, data: SensorDataset, record: dict, useful, private, seed: int) -> dict:
    """The run.json fields every mechanism shares (what export, evaluate and benchmarks read); the mechanism's
    train() completes them, and write_run checks the whole as a RunRecord."""
    return RunRecord(sensorveil_version=__version__, mechanism=mechanism, useful=useful, private=private,
                     dataset=RunDataset.from_json(record), modality=data.modality,
                     model_shape=tuple(model_shape(data)), input=tensor_spec_dict(data, "x"),
                     output=tensor_spec_dict(data, "y"), seed=seed).to_json()


def write_run(out: Path, run) -> Path:
    """Write ``run`` (a RunRecord, or the dict a mechanism's train() returns, checked as one) as run.json."""
    path = Path(out) / RUN_FILE
    record = run if isinstance(run, RunRecord) else RunRecord.from_json(json_round_trip(run), str(path))
    path.write_text(json.dumps(record.to_json(), indent=2, default=json_default))
    return Path(out)


def read_run(run_dir) -> RunRecord:
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"expected a run directory with {RUN_FILE}, got {run_dir}")
    return RunRecord.from_json(json.loads(path.read_text()), str(path))


def as_record(run) -> RunRecord:
    """``run`` as a RunRecord: a mechanism's train() reads the record it is still building through the
    same readers as a saved run."""
    return run if isinstance(run, RunRecord) else RunRecord.from_json(json_round_trip(run))


def json_round_trip(run: dict) -> dict:
    """``run`` as it reads back from run.json (numpy scalars and arrays as JSON numbers and lists)."""
    return json.loads(json.dumps(run, default=json_default))


def json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
