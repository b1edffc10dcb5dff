"""Train any registered mechanism into a run directory (run.json + weights), in one call:

    from sensorveil.sdk.runs import train_run
    run_dir = train_run("pass", "digits", out="runs/pass-digits")

``train_run`` resolves the dataset, the task (useful and private attributes, the dataset's defaults
when none are given) and the mechanism's settings, then hands over to the mechanism
(sensorveil.sdk.mechanisms); the run record it returns is written as run.json.
"""
from __future__ import annotations

import time
from pathlib import Path

from sensorveil.sdk import mechanisms
from sensorveil.sdk.datasets import load_dataset
from sensorveil.sdk.mechanisms.base import TrainRequest, as_list
from sensorveil.sdk.rundir import RUN_FILE, base_record, dataset_record, load_recorded_dataset, read_run, write_run

# The paper's tasks per dataset: (useful y, private z, Acc(D_y) threshold of PR-GAN section 6.4)
DEFAULT_TASKS = {
    "digits": ("parity", "lt5", 0.95),
    "ujiindoorloc": ("floor", "region", 0.75),
    "synthetic-depth": ("facing", "identity", 0.95),
    "adult": ("income", "gender", 0.8),
    "walkway": ("direction", "appearance", 0.8),
}
DEFAULT_THRESHOLD = 0.9


def default_task(dataset: str, useful, private) -> tuple[list, list, float]:
    """(useful attributes, private attributes, utility threshold), the dataset's defaults filling gaps."""
    useful, private = as_list(useful), as_list(private)
    task = DEFAULT_TASKS.get(dataset)
    if (not useful or not private) and task is None:
        raise ValueError(f"dataset {dataset!r} has no default task; pass --useful ATTR and --private ATTR")
    return useful or [task[0]], private or [task[1]], task[2] if task else DEFAULT_THRESHOLD


def train_run(mechanism: str, dataset: str, data_path=None, useful=None, private=None, out=None,
              epochs: int | None = None, seed: int = 0, dataset_options: dict | None = None, config=None,
              attacker_epochs: int = 20, hidden=None, settings: dict | None = None, **options) -> Path:
    """Train one mechanism, evaluate it (protocol + probing attack) and write the run directory.

    ``useful``/``private``: an attribute name or a list (PASS takes several); ``config``: the
    mechanism's config object; ``settings``: overrides of its fields by name (the CLI's --set);
    further keyword options (e.g. ``substitutes=256`` for PASS) are settings too."""
    chosen = mechanisms.get(mechanism)
    settings = {**(settings or {}), **{key: value for key, value in options.items() if value is not None}}
    data = load_dataset(dataset, data_path, **(dataset_options or {}))
    useful, private, threshold = default_task(dataset, useful, private)
    check_disjoint(useful, private, hidden)
    out = Path(out or f"runs/{mechanism}-{dataset}")
    out.mkdir(parents=True, exist_ok=True)
    record = dataset_record(dataset, data_path, recorded_options(dataset_options, data))
    request = TrainRequest(data=data, useful=useful, private=private, hidden=as_list(hidden), out=out, seed=seed,
                           epochs=epochs, attacker_epochs=attacker_epochs, utility_threshold=threshold,
                           settings=settings, config=config,
                           base=base_record(mechanism, data, record, useful, private, seed))
    started = time.time()
    run = chosen.train(request)
    run["train_seconds"] = round(time.time() - started, 1)
    return write_run(out, run)


def recorded_options(options: dict | None, data) -> dict:
    """The loader options a run records: the caller's, with those the dataset records by their outcome
    (SensorDataset.recorded_options; None there drops the caller's)."""
    merged = {**(options or {}), **(data.recorded_options or {})}
    return {key: value for key, value in merged.items() if value is not None}


def check_disjoint(useful, private, hidden) -> None:
    """An attribute cannot be both kept and hidden: training would pull the release two ways at once."""
    overlap = set(as_list(useful)) & set(as_list(private))
    overlap |= set(as_list(hidden)) & set(as_list(private))
    if overlap:
        raise ValueError(f"attribute(s) {sorted(overlap)} are both useful (or hidden) and private; expected "
                         "disjoint --useful/--hidden and --private attributes")


__all__ = ["train_run", "read_run", "write_run", "load_recorded_dataset", "DEFAULT_TASKS", "RUN_FILE"]
