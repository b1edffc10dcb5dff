"""The mechanism interface. Each paper's mechanism is one module under sensorveil/sdk/mechanisms that
registers one :class:`Mechanism` per name it trains (PR-GAN's module registers prgan, ngp, ap and
laplace). ``train_run``, ``evaluate``, ``export_run`` and the CLI only talk to this interface:

* ``train(request)``            train on ``request.data``, save weights under ``request.out``, score the
                                run (paper protocol + probing attack) and return the run record;
* ``evaluate_run(run_dir, run)`` the same figures again from the saved run;
* ``graphs(run_dir, run)``      the torch modules the bundle carries, by graph name (model units in);
* ``bundle(run_dir, run, ...)``  the manifest's mechanism entry and ``pipeline`` (the runtime stages,
                                see sensorveil.runtime.stages), writing the arrays the stages read;
* ``evaluate_bundle(bundle_dir, backend, run_dir, run)`` the probing attack on what the device emits.

A mechanism whose output is a privatized sample in sensor units (PR-GAN, AttriGuard, Sanitizer) gets
``evaluate_run``/``evaluate_bundle`` from this base: it provides ``task`` and ``privatize`` only.

``Mechanism`` is an abstract base (as Flower's Strategy is): ``train``, ``graphs`` and ``bundle`` must be
implemented, so a mechanism that lacks one fails when it is registered, not halfway through an export;
every other method has a default a mechanism may override.
"""
from __future__ import annotations

import abc
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import torch

from sensorveil.sdk.audit import Release
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import Task, apply_privatize, baselines, dataset_slices, evaluate, raw_reference
from sensorveil.sdk.priors import maximum_entropy_distribution
from sensorveil.sdk.rundir import RunRecord, load_recorded_dataset
from sensorveil.sdk.training import to_model

# the kinds of mechanism, as the manifest's mechanism.kind names them
KINDS = ("perturbation", "substitution", "noise", "latent", "representation")


@dataclass
class TrainRequest:
    """What ``train_run`` resolved before handing over to a mechanism."""
    data: SensorDataset
    useful: list
    private: list
    out: Path
    base: dict                       # the run.json keys every mechanism shares (dataset record, specs, ...)
    seed: int = 0
    epochs: int | None = None        # None: the mechanism's default for the dataset
    attacker_epochs: int = 20
    utility_threshold: float = 0.9   # Acc(useful) the mechanism must keep (PR-GAN section 6.4)
    hidden: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)   # `--set KEY=VALUE`: fields of the mechanism's config
    config: object | None = None     # a ready config object (Python API); settings then apply on top


@dataclass
class Graph:
    """One model of a bundle: a torch module whose input is the bundle input in model units
    (``input_from=None``) or the output of another graph of the same bundle; or, for a graph a numpy
    stage feeds (PR-GAN-MED's generator reads x beside the stage's draws), ``inputs(model_inputs)``:
    representative inputs of the graph for these bundle inputs (export validation, int8 calibration)."""
    module: torch.nn.Module
    input_from: str | None = None
    inputs: Callable[[np.ndarray], np.ndarray] | None = None


class BundleParts(NamedTuple):
    """What ``Mechanism.bundle`` returns: the manifest's mechanism entry and its pipeline, one entry per
    runtime stage, each written by that stage's own writer (sensorveil.runtime.stages, ``...Entry``)."""
    entry: dict
    pipeline: list


class Mechanism(abc.ABC):
    """Base class; a mechanism module subclasses it and calls ``register(Subclass())``."""

    name = ""
    kind = "perturbation"
    summary = ""
    config_class = None               # a dataclass of the mechanism's settings, or None
    multi_attribute = False           # takes several useful/private attributes (PASS)
    exportable = True                 # False: evaluated only (the Laplace baseline)
    int8_privacy_check = True         # int8 exports re-run the probing attack on the quantized bundle

    # -- configuration ---------------------------------------------------------------------
    def make_config(self, request: TrainRequest):
        """``request.config`` (or the class's defaults, seeded) with ``request.settings`` applied;
        an unknown key or a value of the wrong type is one ValueError naming the valid keys."""
        if self.config_class is None:
            if request.settings:
                raise ValueError(f"{self.name} takes no settings; got {sorted(request.settings)}")
            return None
        config = request.config if request.config is not None else self.config_class(seed=request.seed)
        fields = {f.name: f for f in dataclasses.fields(config)}
        for key, value in request.settings.items():
            if key not in fields:
                raise ValueError(f"{self.name} has no setting {key!r}; expected one of {sorted(fields)}")
            current = getattr(config, key)
            value = coerce(value, declared_example(fields[key]) if current is None else current, key)
            check_setting_range(self.name, key, value)
            setattr(config, key, value)
        return config

    def only_one(self, values, role: str) -> str:
        """The one useful or private attribute a single-attribute mechanism takes; an error names it."""
        values = as_list(values)
        if len(values) != 1:
            raise ValueError(f"{self.name} takes one {role} attribute, got {values}")
        return values[0]

    def config_of(self, run: RunRecord):
        """The config a saved run was trained with (run.json's "config"; JSON lists back to tuples)."""
        defaults = {f.name: f.default for f in dataclasses.fields(self.config_class)}
        values = {key: tuple(value) if isinstance(defaults.get(key), tuple) else value
                  for key, value in run.config.items() if key in defaults}
        return self.config_class(**values)

    # -- what every mechanism implements -----------------------------------------------------
    @abc.abstractmethod
    def train(self, request: TrainRequest) -> dict:
        """Train on ``request.data``, save the weights under ``request.out``, score the run; returns the run
        record (run.json: ``request.base`` completed with useful, private, seed, kind, config, metrics)."""

    @abc.abstractmethod
    def graphs(self, run_dir: Path, run: RunRecord) -> dict[str, Graph]:
        """{graph name: Graph}; a single-model mechanism names its graph "model"."""

    @abc.abstractmethod
    def bundle(self, run_dir: Path, run: RunRecord, dataset: SensorDataset, out_dir: Path,
               include_samples: bool = True) -> BundleParts:
        """The manifest's mechanism entry and pipeline; writes the .npy arrays the stages name."""

    # -- sample-emitting mechanisms: provide task() and privatize(), inherit the evaluation ----
    def task(self, run_dir: Path, run: RunRecord) -> tuple[Task, dict | None]:
        """The evaluation task of a saved run (data in model units, the split) and the fixed
        classifiers of the paper protocol (None when the mechanism has none)."""
        return protocol_task(load_run_dataset(run), run.useful, run.private, run.seed), None

    def privatize(self, run_dir: Path, run: RunRecord) -> Callable[[torch.Tensor], torch.Tensor]:
        """The trained mechanism in torch: model units in, model units out. The default has none: a
        mechanism whose evaluation does not go through it (PASS draws from its bank) overrides ``release``,
        ``evaluate_run`` and ``evaluate_bundle`` instead."""
        raise NotImplementedError(f"{self.name} has no torch privatize; its release and evaluation are its own")

    # output modes the audit loads a bundle with (PASS: its bank index, which also feeds the exact-posterior attacker)
    audit_load_options: dict = {}

    def release(self, run_dir: Path, run: RunRecord, privatizer=None) -> Release:
        """What an attacker sees (sensorveil.sdk.audit): the task's splits privatized by the trained
        mechanism, or by ``privatizer`` (a loaded bundle) exactly as the device emits them."""
        task, fixed = self.task(run_dir, run)
        privatize = bundle_privatize(privatizer) if privatizer is not None else self.privatize(run_dir, run)
        return Release(task=task, train=apply_privatize(privatize, task.x[task.attacker_train]),
                       test=apply_privatize(privatize, task.x[task.test]), fixed=fixed)

    def evaluate_run(self, run_dir: Path, run: RunRecord, attacker_epochs: int = 20) -> dict:
        task, fixed = self.task(run_dir, run)
        return {**reference_figures(task, fixed),
                **evaluate(task, self.privatize(run_dir, run), fixed, attacker_epochs=attacker_epochs,
                           seed=run.seed)}

    def evaluate_bundle(self, bundle_dir, backend: str, run_dir: Path, run: RunRecord,
                        attacker_epochs: int = 20) -> dict:
        """The figures of ``evaluate_run``, measured on what the bundle emits through the runtime."""
        from sensorveil.runtime import Privatizer
        privatizer = Privatizer.load(bundle_dir, backend=backend)
        task, fixed = self.task(run_dir, run)
        return {"backend": privatizer.backend_name, **reference_figures(task, fixed),
                **evaluate(task, bundle_privatize(privatizer), fixed, attacker_epochs=attacker_epochs,
                           seed=run.seed)}


def as_list(value) -> list:
    """An attribute name or a list of them, as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


SCALARS = {"bool": bool, "int": int, "float": float, "str": str}


def declared_example(setting: dataclasses.Field):
    """A value of the type a setting whose default is None declares ("int | None" -> 0), so that
    `--set epochs=5` becomes 5; None where the annotation names no scalar (the value is kept as given)."""
    for name in str(setting.type).replace("Optional[", "").replace("]", "").split("|"):
        if name.strip() in SCALARS:
            return SCALARS[name.strip()]()
    return None


def coerce(value, current, key: str):
    """A `--set` string (or a Python value) as the type of the setting it replaces."""
    if not isinstance(value, str) or isinstance(current, str) or current is None:
        return value
    try:
        if isinstance(current, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return value.lower() in ("true", "1")
        if isinstance(current, (tuple, list)):
            return type(current)(type(current[0])(v) if current else float(v) for v in value.split(","))
        return type(current)(value)
    except ValueError:
        raise ValueError(f"setting {key}={value!r}: expected a {type(current).__name__}") from None


MAX_SIZE = 1 << 16     # largest batch or layer width a setting may ask for


def check_setting_range(mechanism: str, key: str, value) -> None:
    """Before any work starts: a number must be finite, a learning rate positive, an epoch count at least
    one (a run with no training would be recorded as if trained), other counts not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{mechanism} setting {key}={value}: expected a finite number")
    name = key.lower()
    if (name.startswith("lr") or "learning_rate" in name) and not value > 0:
        raise ValueError(f"{mechanism} setting {key}={value}: expected a learning rate above 0")
    if name in ("epochs", "classifier_epochs", "rounds", "local_epochs") and value < 1:
        raise ValueError(f"{mechanism} setting {key}={value}: expected 1 or more")
    if name.endswith(("epochs", "steps", "iterations", "batch_size", "substitutes")) and value < 0:
        raise ValueError(f"{mechanism} setting {key}={value}: expected 0 or more")
    # sizes of a network or a batch: 0 trains nothing (or divides by it), and beyond MAX_SIZE the first
    # allocation fails minutes in with a traceback
    if name.endswith(("batch_size", "_dim", "hidden", "width", "channels")) and not 1 <= value <= MAX_SIZE:
        raise ValueError(f"{mechanism} setting {key}={value}: expected a size from 1 to {MAX_SIZE:,}")


def load_run_dataset(run: RunRecord) -> SensorDataset:
    return load_recorded_dataset(run.dataset)


def protocol_task(data: SensorDataset, useful: str, private: str, seed: int, x: torch.Tensor | None = None) -> Task:
    """PR-GAN's three slices (section 5.3): the attackers learn from slices 1-2, everything is scored
    on slice 3; Random* from the dataset's public prior (eq. 3). ``x``: the data in model units, when
    the caller has it already."""
    y, z = data.attributes[useful], data.attributes[private]
    n_y, n_z = data.num_classes[useful], data.num_classes[private]
    slices = dataset_slices(data, useful, private, seed)
    return Task(x=to_model(data) if x is None else x, useful=y, private=z, n_useful=n_y, n_private=n_z,
                med=maximum_entropy_distribution(data.prior(useful, private), n_y, n_z),
                attacker_train=np.concatenate([slices["classifiers"], slices["generator_train"],
                                               slices["generator_val"]]),
                test=slices["test"], modality=data.modality)


def reference_figures(task: Task, fixed: dict | None) -> dict:
    """Random* and friends, and the fixed classifiers on raw data when there are any."""
    return {**(raw_reference(task, fixed) if fixed else {}), **baselines(task)}


def bundle_privatize(privatizer) -> Callable[[torch.Tensor], torch.Tensor]:
    """A runtime Privatizer as a model-units function: model -> sensor units -> device -> model units,
    so the attackers see exactly what the device emits (sensor rounding and quantization included)."""
    from sensorveil.runtime.spec import to_model_units, to_sensor_units

    def privatize(x: torch.Tensor) -> torch.Tensor:
        out = privatizer(to_sensor_units(x.numpy(), privatizer.input_spec))
        return torch.from_numpy(to_model_units(out, privatizer.output_spec))
    return privatize
