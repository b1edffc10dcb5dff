"""A training run on disk: run.json (what was trained, on what, with which figures) plus weights.

Weights are torch state dicts loaded with ``weights_only=True``, so reading a run never
unpickles arbitrary objects. Everything else is JSON a person can read.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from sensorveil import __version__
from sensorveil.sdk import prgan
from sensorveil.sdk.datasets import load_dataset
from sensorveil.sdk.evaluation import baselines, evaluate, raw_reference
from sensorveil.sdk.networks import make_classifier, make_generator
from sensorveil.sdk.training import apply, model_shape, tensor_spec_dict

# mechanism -> how it is trained; "laplace" has no network and is evaluated, not exported.
# "pass" (sensorveil.sdk.pass_mechanism) substitutes samples instead of perturbing them.
MECHANISMS = ("prgan", "ngp", "ap", "laplace", "pass")
SUBSTITUTION_MECHANISMS = ("pass",)
# The paper's tasks per dataset: (useful y, private z, Acc(D_y) threshold of section 6.4)
DEFAULT_TASKS = {
    "digits": ("parity", "lt5", 0.95),
    "ujiindoorloc": ("floor", "region", 0.75),
    "synthetic-depth": ("facing", "identity", 0.95),
}
RUN_FILE = "run.json"


def default_task(dataset: str, useful, private) -> tuple[str, str, float]:
    task = DEFAULT_TASKS.get(dataset)
    if (useful is None or private is None) and task is None:
        raise ValueError(f"dataset {dataset!r} has no default task; pass --useful ATTR and --private ATTR")
    return useful or task[0], private or task[1], task[2] if task else 0.9


def dataset_record(name: str, path, options: dict) -> dict:
    return {"name": name, "path": str(path) if path else None, "options": options or {}}


def load_recorded_dataset(record: dict):
    return load_dataset(record["name"], record.get("path"), **record.get("options", {}))


def train_run(mechanism: str, dataset: str, data_path=None, useful=None, private=None, out=None,
              epochs: int | None = None, seed: int = 0, dataset_options: dict | None = None,
              config: prgan.PRGANConfig | None = None, attacker_epochs: int = 20, hidden=None,
              substitutes: int | None = None) -> Path:
    """Train one mechanism, evaluate it (protocol + probing attack) and write the run directory.
    PASS takes lists of useful/private attributes, ``hidden`` attributes for mNAG and the bank size."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; expected one of {MECHANISMS}")
    data = load_dataset(dataset, data_path, **(dataset_options or {}))
    if mechanism in SUBSTITUTION_MECHANISMS:
        return _train_substitution_run(mechanism, data, dataset, data_path, dataset_options, useful, private, out,
                                       epochs, seed, config, attacker_epochs, hidden, substitutes)
    useful, private, threshold = default_task(dataset, useful, private)
    cfg = config or prgan.PRGANConfig(utility_threshold=threshold, seed=seed)
    if epochs:
        cfg.epochs = epochs
    started = time.time()
    exp = prgan.prepare(data, useful, private, cfg)
    task = exp.task
    run = {**base_record(mechanism, data, dataset, data_path, dataset_options, useful, private, seed),
           "config": prgan.config_dict(cfg),
           "reference": {**raw_reference(task, exp.fixed), **baselines(task),
                         "utility_threshold": cfg.utility_threshold}}
    out = Path(out or f"runs/{mechanism}-{dataset}")
    out.mkdir(parents=True, exist_ok=True)
    if mechanism == "laplace":
        epsilon, selection = prgan.fit_laplace(exp)
        privatize = prgan.laplace_privatize(1.0 / epsilon)
    else:
        G, selection = prgan.fit_variant(exp, mechanism)
        privatize = lambda x: apply(G, x)
        torch.save(G.state_dict(), out / "generator.pt")
    for key in ("D_y", "D_z"):
        torch.save(exp.fixed[key].state_dict(), out / f"{key}.pt")
    run["selection"] = selection
    run["metrics"] = evaluate(task, privatize, exp.fixed, attacker_epochs=attacker_epochs, seed=seed)
    run["train_seconds"] = round(time.time() - started, 1)
    return write_run(out, run)


def base_record(mechanism: str, data, dataset: str, data_path, dataset_options, useful, private, seed: int) -> dict:
    """The run.json keys every mechanism shares (what export, evaluate and benchmarks read)."""
    return {"sensorveil_version": __version__, "mechanism": mechanism, "useful": useful, "private": private,
            "dataset": dataset_record(dataset, data_path, dataset_options), "modality": data.modality,
            "model_shape": list(model_shape(data)), "input": tensor_spec_dict(data, "x"),
            "output": tensor_spec_dict(data, "y"), "seed": seed}


def write_run(out: Path, run: dict) -> Path:
    (Path(out) / RUN_FILE).write_text(json.dumps(run, indent=2, default=_json_default))
    return Path(out)


def _train_substitution_run(mechanism, data, dataset, data_path, dataset_options, useful, private, out, epochs,
                            seed, config, attacker_epochs, hidden, substitutes) -> Path:
    """PASS: several useful/private attributes (lists in run.json), default task as for PR-GAN."""
    from sensorveil.sdk import pass_mechanism
    default_useful, default_private, _ = default_task(dataset, useful, private)
    useful = pass_mechanism.as_list(useful) or [default_useful]
    private = pass_mechanism.as_list(private) or [default_private]
    cfg = config or pass_mechanism.PASSConfig(seed=seed)
    cfg.epochs = epochs or cfg.epochs
    cfg.substitutes = substitutes or cfg.substitutes
    out = Path(out or f"runs/{mechanism}-{dataset}")
    out.mkdir(parents=True, exist_ok=True)
    base = base_record(mechanism, data, dataset, data_path, dataset_options, useful, private, cfg.seed)
    run = pass_mechanism.train_pass_run(base, data, out, cfg, hidden=hidden, attacker_epochs=attacker_epochs)
    return write_run(out, run)


def read_run(run_dir) -> dict:
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"expected a run directory with {RUN_FILE}, got {run_dir}")
    return json.loads(path.read_text())


def load_model(run_dir) -> torch.nn.Module:
    """The torch module a bundle carries, for any mechanism: PR-GAN's generator, or PASS's f with
    the similarity-and-softmax head folded in (outputs P(X'|X))."""
    run = read_run(run_dir)
    if run["mechanism"] in SUBSTITUTION_MECHANISMS:
        from sensorveil.sdk import pass_mechanism
        return pass_mechanism.load_head(run_dir, run)
    return load_generator(run_dir)


def load_generator(run_dir) -> torch.nn.Module:
    run = read_run(run_dir)
    if run["mechanism"] == "laplace":
        raise ValueError("the laplace baseline has no network to export; it adds noise in numpy")
    G = make_generator(run["modality"], tuple(run["model_shape"]))
    G.load_state_dict(torch.load(Path(run_dir) / "generator.pt", weights_only=True))
    return G.eval()


def load_fixed(run_dir, run: dict, data) -> dict:
    """The defender's D_y and D_z saved with the run (state dicts, weights_only)."""
    fixed = {}
    for key, attr in (("D_y", run["useful"]), ("D_z", run["private"])):
        net = make_classifier(run["modality"], tuple(run["model_shape"]), data.num_classes[attr])
        net.load_state_dict(torch.load(Path(run_dir) / f"{key}.pt", weights_only=True))
        fixed[key] = net.eval().requires_grad_(False)
    return fixed


def reload_experiment(run_dir, run: dict) -> prgan.Experiment:
    """The run's data, splits and fixed classifiers, rebuilt without retraining anything."""
    data = load_recorded_dataset(run["dataset"])
    cfg = prgan.PRGANConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in run["config"].items()})
    return prgan.prepare(data, run["useful"], run["private"], cfg, fixed=load_fixed(run_dir, run, data))


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
