"""TAPPFL (Arevalo et al., AAAI 2024, ../shared/papers/tappfl.md): task-agnostic privacy-preserving
representation learning in federated learning, against attribute inference.

Every device i holds three networks: the feature extractor f_Theta (the representation r = f(x) that
is released), the privacy-protection network g_Psi (the auxiliary posterior q_Psi(u|r) of the private
attribute u) and the utility-preservation network h_Omega (a critic on (x, r, u)). Only f is
federated: FedAvg on Flower averages Theta, while Psi and Omega stay on the device across rounds.

The bounds, as the paper writes them:

* privacy, eq. 2: I(r; u) <= I_vCLUB = E_p(r,u)[log q_Psi(u|r)] - E_p(r)p(u)[log q_Psi(u|r)], valid
  while q_Psi meets the condition under eq. 2 (KL(p(r,u)||q) <= KL(p(r)p(u)||q)); Psi is trained for it
  by eq. 3, max_Psi E_p(r,u)[log q_Psi(u|r)] (the cross-entropy of g_Psi). f minimises I_vCLUB.
  Eq. 4 and 7 then keep only the first term (min_Theta max_Psi E log q), which is the adversarial
  cross-entropy the authors' code trains; ``privacy_bound="ce"`` runs that form for comparison, the
  default ``"vclub"`` the bound of eq. 2.
* utility, eq. 5-6 estimated with the JSD form of "Implementation in practice":
  I_JSD = E[-sp(-h(x, f(x), u))] - E[sp(h(x_bar, f(x), u))], x_bar an independent sample from the
  device's data, sp the softplus. f and h both maximise it.
* eq. 7: the device objective max_Theta lambda * (privacy term) + (1 - lambda) * (utility term); f
  descends lambda * I_vCLUB - (1 - lambda) * I_JSD.

Algorithm 1's DeviceUpdate per mini-batch: one SGD step of Psi (eq. 3), of Omega (JSD), then of Theta
(eq. 7), for E local epochs with batch B. Its line 18 descends lambda * CE_loss + ..., which would
help the adversary (eq. 4 and 7 maximise the CE over Theta); we follow eq. 4/7's direction.

Choices where the paper is silent or ambiguous (also in the README and the results page):

* pre-training of f ("we first pretrain the feature extractor network only"): federated rounds of the
  utility term alone (lambda = 0, g untouched), from one seeded initialisation the server broadcasts;
* x_bar is drawn from p(x), as written, not from p(x|u): by the chain rule I(x; r, u) = I(x; u) +
  I(x; r | u) and I(x; u) does not depend on Theta, so the estimate moves with I(x; r | u);
* p(u) in eq. 2's second term is the device's own label distribution (the bound is per device);
* Table 3's architectures are garbled in the paper's HTML; we use its tabular column's widths where
  legible (f: 64-128-d, g: 64-128-128-K) and end f with tanh, so r is bounded as Theorem 1 assumes;
* evaluation: attackers trained on the released representations (a neural net and 200 extra-trees),
  not the devices' own g (which is what the paper scores); random guessing is 1/K as in Table 2.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk import federated
from sensorveil.sdk.audit import Release
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import (Task, apply_privatize, baselines, make_slices, probing_attack,
                                       tree_attacker_accuracy)
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import Graph, Mechanism, TrainRequest, as_list, bundle_privatize
from sensorveil.sdk.rundir import load_recorded_dataset
from sensorveil.sdk.training import batches, to_model

MECHANISM = "tappfl"
FEATURE_FILE = "feature_extractor.pt"
HISTORY_FILE = "federation.json"
SIMULATION_APPS = "sensorveil.sdk.mechanisms.tappfl:simulation_apps"
SERVER_APP = "sensorveil.sdk.federated_apps:tappfl_server_app"   # module-level objects, as Flower requires
CLIENT_APP = "sensorveil.sdk.federated_apps:tappfl_client_app"
PHASES = ("pretrain", "tappfl")
BOUNDS = ("vclub", "ce")
STATE_KEYS = {"g": "tappfl.g_psi", "h": "tappfl.h_omega"}   # the device's own networks, kept across rounds


@dataclass
class TAPPFLConfig:
    lam: float = 0.5                  # lambda of eq. 7 (Table 2 sweeps 0, 0.25, 0.5, 0.75, 1)
    rounds: int = 20                  # T, global rounds (experimental setup); --epochs sets it too
    pretrain_rounds: int = 5          # federated rounds of the utility term alone before TAPPFL; 0: none
    pretrained: str = ""              # a feature_extractor.pt (or run directory) to start from instead
    clients: int = 100                # M devices (experimental setup)
    fraction: float = 0.1             # rho, share of devices per round (experimental setup)
    participation: str = "sampled"    # "sampled": only rho M devices train a round (Flower's FedAvg);
                                      # "all": Algorithm 1, all M train and the server averages rho M
    local_epochs: int = 10            # E (experimental setup)
    batch_size: int = 10              # B (experimental setup)
    lr: float = 0.01                  # lr1 = lr2 = lr3, plain SGD (experimental setup)
    representation_dim: int = 16
    privacy_bound: str = "vclub"      # "vclub": eq. 2; "ce": eq. 4/7's cross-entropy form (authors' code)
    partition: str = "iid"            # "iid" or "dirichlet" (non-IID, concentration alpha)
    alpha: float = 0.5
    partition_by: str = ""            # the attribute a Dirichlet partition skews; "": the private one
    evaluate_fraction: float = 0.1    # devices per round that run @app.evaluate (local attack probe)
    federation: str = "simulation"    # "simulation" (run_simulation) or "deployment" (flwr run)
    superlink: str = ""               # deployment: a SuperLink connection of $FLWR_HOME/config.toml
    timeout_s: float = 3600.0         # wall-clock limit of the whole federation; past it the run fails
    round_timeout_s: float = 600.0    # a device that has not replied by then fails the round
    cpus: int = 2                     # simulation: ClientApps run in parallel (one per CPU)
    aggregation: str = "fedavg"       # "fedavg" (weighted mean), "fedmedian" or "fedtrimmedavg": Flower's
                                      # strategies of those names (sdk/federated_strategy.py)
    trim_fraction: float = 0.2        # fedtrimmedavg: share of updates cut from each tail (Flower's beta)
    min_valid_replies: int = 0        # a round with fewer valid updates fails; 0: more than half the sample
    max_examples: int = 0             # largest "num-examples" a device may claim; 0: the largest partition
                                      # (set it when nodes train on their own data)
    max_update_ratio: float = 100.0   # drop an update moving f by more than this times its norm; 0: off
    reference_attacks: bool = True    # also attack the raw data (the "no defence" reference)
    seed: int = 0
    progress: bool = True


# -- the three networks (Table 3, tabular column, as far as it is legible) ----------------------
def feature_extractor(input_dim: int, representation_dim: int) -> nn.Module:
    """f_Theta: model-unit sample -> r in [-1, 1]^d (tanh: Theorem 1's bounded representation space)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(input_dim, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                         nn.Linear(128, representation_dim), nn.Tanh())


def privacy_network(representation_dim: int, n_private: int) -> nn.Module:
    """g_Psi: r -> logits of q_Psi(u | r)."""
    return nn.Sequential(nn.Linear(representation_dim, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                         nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, n_private))


class UtilityCritic(nn.Module):
    """h_Omega(x, r, u) = s * cos(phi(x), psi(r, u)): a separable critic (the "encode and compare" critics
    of Hjelm et al., whose JSD estimator the paper uses). A critic on the concatenation [x, r, u] did not
    leave -2 log 2 in 1,200 SGD steps at the paper's lr 0.01 on digits; this one does within a few
    hundred. |h| <= s bounds the estimate's top at -2 sp(-s) (-0.013 for s = 5) instead of 0."""

    def __init__(self, input_dim: int, representation_dim: int, n_private: int, scale: float = 5.0):
        super().__init__()
        self.n_private, self.scale = n_private, scale
        self.phi = nn.Sequential(nn.Linear(input_dim, 128), nn.ReLU(), nn.Linear(128, 64))
        self.psi = nn.Sequential(nn.Linear(representation_dim + n_private, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x: torch.Tensor, r: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(u, self.n_private).to(r.dtype)
        a = F.normalize(self.phi(x.flatten(1)), dim=1)
        b = F.normalize(self.psi(torch.cat([r, onehot], dim=1)), dim=1)
        return self.scale * (a * b).sum(1)


@dataclass
class DeviceNetworks:
    f: nn.Module
    g: nn.Module
    h: nn.Module

    @classmethod
    def build(cls, model: dict, seed: int) -> "DeviceNetworks":
        torch.manual_seed(seed)
        d, k = model["representation_dim"], model["n_private"]
        return cls(f=feature_extractor(model["input_dim"], d), g=privacy_network(d, k),
                   h=UtilityCritic(model["input_dim"], d, k))


# -- the bounds --------------------------------------------------------------------------------
def vclub_upper_bound(logits: torch.Tensor, u: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """Eq. 2: E_p(r,u)[log q(u|r)] - E_p(r)p(u)[log q(u|r)]. With u discrete the second expectation is
    exact: sum_k p(k) log q(k|r), averaged over the batch's r."""
    log_q = F.log_softmax(logits, dim=1)
    joint = log_q.gather(1, u[:, None]).mean()
    marginal = (log_q @ prior.to(log_q.dtype)).mean()
    return joint - marginal


def privacy_condition_loss(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Eq. 3: max_Psi E_p(r,u)[log q_Psi(u|r)], minimised as the cross-entropy of g_Psi (the condition
    under eq. 2 that makes I_vCLUB an upper bound)."""
    return F.cross_entropy(logits, u)


def jsd_mutual_information(h: nn.Module, x: torch.Tensor, x_bar: torch.Tensor, r: torch.Tensor,
                           u: torch.Tensor) -> torch.Tensor:
    """The JSD estimate of "Implementation in practice" (eq. 5-6's lower bound):
    E[-sp(-h(x, r, u))] - E[sp(h(x_bar, r, u))]. Its supremum over h is 2 JSD(joint || product) - 2 log 2."""
    return (-F.softplus(-h(x, r, u))).mean() - F.softplus(h(x_bar, r, u)).mean()


def negatives(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """x_bar: each row paired with another row of the batch (a random cyclic shift), i.e. an independent
    draw from the device's data."""
    shift = int(torch.randint(1, len(x), (1,), generator=generator))
    return torch.roll(x, shifts=shift, dims=0)


# -- Algorithm 1, DeviceUpdate -------------------------------------------------------------------
@dataclass
class LocalSettings:
    phase: str
    lam: float
    privacy_bound: str
    local_epochs: int
    batch_size: int
    lr: float

    @classmethod
    def from_config(cls, config) -> "LocalSettings":
        settings = cls(phase=str(config["phase"]), lam=float(config["lam"]), privacy_bound=str(config["privacy-bound"]),
                       local_epochs=int(config["local-epochs"]), batch_size=int(config["batch-size"]),
                       lr=float(config["lr"]))
        if settings.phase not in PHASES or settings.privacy_bound not in BOUNDS:
            raise ValueError(f"phase {settings.phase!r} / privacy bound {settings.privacy_bound!r}; expected one of "
                             f"{PHASES} / {BOUNDS}")
        return settings


def sgd_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def privacy_term(nets: DeviceNetworks, r: torch.Tensor, u: torch.Tensor, prior: torch.Tensor, bound: str):
    """What f minimises for privacy: eq. 2's I_vCLUB, or eq. 4/7's -CE (the adversarial form)."""
    logits = nets.g(r)
    if bound == "vclub":
        return vclub_upper_bound(logits, u, prior)
    return -privacy_condition_loss(logits, u)


def theta_objective(nets: DeviceNetworks, r, x, x_bar, u, prior, settings: LocalSettings) -> tuple:
    """What f descends (eq. 7 turned into a loss): lambda * privacy - (1 - lambda) * I_JSD, with the
    privacy term of eq. 2 (or eq. 4's -CE); the utility term alone while pre-training.
    Returns (loss, privacy term or None, utility term)."""
    utility = jsd_mutual_information(nets.h, x, x_bar, r, u)
    if settings.phase == "pretrain":
        return -utility, None, utility
    privacy = privacy_term(nets, r, u, prior, settings.privacy_bound)
    return settings.lam * privacy - (1.0 - settings.lam) * utility, privacy, utility


def device_step(nets: DeviceNetworks, optimizers: dict, x, u, prior, settings: LocalSettings,
                generator: torch.Generator) -> dict:
    """One mini-batch of Algorithm 1 (lines 16-18): Psi and Omega, then Theta with the updated g, h.
    Psi's loss (eq. 3) and Omega's (the JSD estimate) see r detached and share no parameters, so one
    backward pass gives both the gradients Algorithm 1 takes one after the other. Pre-training
    leaves g alone (the utility term only)."""
    x_bar = negatives(x, generator)
    r = nets.f(x)
    critic_loss = -jsd_mutual_information(nets.h, x, x_bar, r.detach(), u)
    ce = privacy_condition_loss(nets.g(r.detach()), u) if settings.phase == "tappfl" else None
    sgd_step(optimizers["gh"], critic_loss if ce is None else critic_loss + ce)
    loss, privacy, utility = theta_objective(nets, r, x, x_bar, u, prior, settings)
    sgd_step(optimizers["f"], loss)
    figures = {"jsd": float(utility.detach())}
    if privacy is not None:
        figures["ce"] = float(ce.detach())
        figures["vclub" if settings.privacy_bound == "vclub" else "neg_ce"] = float(privacy.detach())
    return figures


def device_update(nets: DeviceNetworks, x: torch.Tensor, u: torch.Tensor, n_private: int,
                  settings: LocalSettings, generator: torch.Generator) -> dict:
    """E local epochs over the device's data; the figures are the last epoch's means (Figure 2's CE
    and JSD values, and the vCLUB estimate)."""
    prior = torch.bincount(u, minlength=n_private).float() / len(u)
    optimizers = {"f": torch.optim.SGD(nets.f.parameters(), lr=settings.lr),
                  "gh": torch.optim.SGD([*nets.g.parameters(), *nets.h.parameters()], lr=settings.lr)}
    for module in (nets.f, nets.g, nets.h):
        module.train()
    last = {}
    for epoch in range(settings.local_epochs):
        sums, steps = {}, 0
        for idx in batches(len(x), settings.batch_size, generator):
            if len(idx) < 2:   # x_bar needs a second sample in the batch
                continue
            for key, value in device_step(nets, optimizers, x[idx], u[idx], prior, settings, generator).items():
                sums[key] = sums.get(key, 0.0) + value
            steps += 1
        last = {key: value / max(steps, 1) for key, value in sums.items()}
    return last


def local_attack_probe(f: nn.Module, g: nn.Module, x, u, n_private: int, settings: LocalSettings,
                       generator: torch.Generator) -> dict:
    """@app.evaluate: the paper's own leakage measure on this device, f + g (section "Evaluation
    metrics"): g is fitted by eq. 3 to the global f's representations of the device's data for E
    epochs (a copy; the device's g is not changed), then scored on that same data (optimistic)."""
    with torch.no_grad():
        r = f.eval()(x)
    optimizer = torch.optim.SGD(g.parameters(), lr=settings.lr)
    g.train()
    for _ in range(settings.local_epochs):
        for idx in batches(len(r), settings.batch_size, generator):
            sgd_step(optimizer, privacy_condition_loss(g(r[idx]), u[idx]))
    with torch.no_grad():
        logits = g.eval()(r)
        prior = torch.bincount(u, minlength=n_private).float() / len(u)
        return {"attack_acc": float((logits.argmax(1) == u).float().mean()),
                "attack_ce": float(privacy_condition_loss(logits, u)),
                "vclub": float(vclub_upper_bound(logits, u, prior))}


# -- the device's data -------------------------------------------------------------------------
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


def node_identity(context) -> int:
    return int(context.node_config.get("partition-id", context.node_id % (2**31)))


def device_inputs(msg, context):
    """(task, settings, data, networks with the global f and this device's own g, h)."""
    config = msg.content["config"]
    task = json.loads(str(config["task"]))
    node = {key: value for key, value in context.node_config.items()
            if key in ("partition-id", "num-partitions", "dataset", "data-path")}
    data = device_data(str(config["task"]), json.dumps(node, sort_keys=True))
    nets = DeviceNetworks.build(task["model"], seed=task["seed"] * 7919 + node_identity(context))
    nets.f.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    for name, key in STATE_KEYS.items():
        if key in context.state:
            getattr(nets, name).load_state_dict(context.state[key].to_torch_state_dict())
    return task, LocalSettings.from_config(config), data, nets


def round_generator(task: dict, context, config) -> torch.Generator:
    """The device's batch order and negatives for this round: seeded, and the same in every process."""
    words = [task["seed"], node_identity(context), int(config["server-round"]), PHASES.index(str(config["phase"]))]
    return torch.Generator().manual_seed(int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1))


def device_train(msg, context):
    """@client_app.train(): DeviceUpdate; only f goes back to the server, g and h stay on the device."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    torch.set_num_threads(1)
    task, settings, data, nets = device_inputs(msg, context)
    figures = device_update(nets, data.x, data.u, data.n_private, settings,
                            round_generator(task, context, msg.content["config"]))
    for name, key in STATE_KEYS.items():
        context.state[key] = ArrayRecord(getattr(nets, name).state_dict())
    content = RecordDict({"arrays": ArrayRecord(nets.f.state_dict()),
                          "metrics": MetricRecord({"num-examples": len(data.x), **figures})})
    return Message(content=content, reply_to=msg)


def device_evaluate(msg, context):
    """@client_app.evaluate(): the local attack probe on the global f."""
    from flwr.app import Message, MetricRecord, RecordDict
    torch.set_num_threads(1)
    task, settings, data, nets = device_inputs(msg, context)
    figures = local_attack_probe(nets.f, nets.g, data.x, data.u, data.n_private, settings,
                                 round_generator(task, context, msg.content["config"]))
    return Message(content=RecordDict({"metrics": MetricRecord({"num-examples": len(data.x), **figures})}),
                   reply_to=msg)


# -- the server ---------------------------------------------------------------------------------
class RoundLog:
    """Progress per round (one line each) and the history the run record keeps."""

    def __init__(self, phase: str, rounds: int, history: list, verbose: bool):
        self.phase, self.rounds, self.history, self.verbose = phase, rounds, history, verbose

    def __call__(self, stage: str, server_round: int, metrics: dict, seconds: float, devices: int,
                 dropped: list = ()) -> None:
        metrics = {k: float(v) for k, v in metrics.items() if k != "num-examples"}
        if stage == "train":
            self.history.append({"phase": self.phase, "round": server_round, "devices": devices,
                                 "seconds": round(seconds, 2), "train": metrics, "dropped": list(dropped)})
        else:
            self.history[-1]["evaluate"] = {"devices": devices, "seconds": round(seconds, 2), **metrics,
                                            "dropped": list(dropped)}
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
            label = f"{self.phase} round {server_round}/{self.rounds}" if stage == "train" else "  local attack probe"
            print(f"[tappfl] {label}: {devices} devices, {seconds:.1f} s | {shown}", flush=True)


def phase_config(spec: dict, phase: str):
    from flwr.app import ConfigRecord
    cfg = spec["config"]
    return ConfigRecord({"task": json.dumps(spec["task"]), "phase": phase,
                         "lam": float(cfg["lam"]) if phase == "tappfl" else 0.0,
                         "privacy-bound": cfg["privacy_bound"], "local-epochs": int(cfg["local_epochs"]),
                         "batch-size": int(cfg["batch_size"]), "lr": float(cfg["lr"])})


def initial_feature_extractor(spec: dict) -> nn.Module:
    """Theta_0 the server broadcasts: seeded, or a pre-trained f when the config names one."""
    model = spec["task"]["model"]
    torch.manual_seed(spec["config"]["seed"])
    f = feature_extractor(model["input_dim"], model["representation_dim"])
    if spec["config"]["pretrained"]:
        f.load_state_dict(torch.load(pretrained_path(spec["config"]["pretrained"]), weights_only=True))
    return f


def pretrained_path(value: str) -> Path:
    path = Path(value)
    path = path / FEATURE_FILE if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"pretrained={value!r}: expected a {FEATURE_FILE} or a tappfl run directory")
    return path


def server_strategy(spec: dict):
    from sensorveil.sdk.federated_strategy import strategy_class
    return strategy_class(spec["config"].get("aggregation", "fedavg"))


def strategy_settings(spec: dict) -> dict:
    """The typed settings of the strategy: what the server accepts from a device, and trimming."""
    from sensorveil.sdk.federated_validation import UpdateLimits
    cfg, limits = spec["config"], spec.get("limits", {})
    settings = {"limits": UpdateLimits(max_examples=limits.get("max_examples") or None,
                                       max_update_ratio=float(cfg.get("max_update_ratio", 0.0))),
                "min_valid_replies": int(cfg.get("min_valid_replies", 0))}
    if cfg.get("aggregation") == "fedtrimmedavg":
        settings["beta"] = float(cfg["trim_fraction"])
    return settings


def run_server(grid, spec: dict) -> None:
    """@server_app.main(): pre-training rounds, then TAPPFL rounds, FedAvg over f only; writes f and the
    round history into the run directory."""
    from flwr.app import ArrayRecord
    cfg = spec["config"]
    random.seed(cfg["seed"])   # Flower samples the devices of a round with `random`
    arrays = ArrayRecord(initial_feature_extractor(spec).state_dict())
    history = []
    for phase, rounds in (("pretrain", cfg["pretrain_rounds"]), ("tappfl", cfg["rounds"])):
        if rounds <= 0:
            continue
        everyone = cfg["participation"] == "all"
        strategy = server_strategy(spec)(
            fraction_train=1.0 if everyone else cfg["fraction"], aggregate_fraction=cfg["fraction"] if everyone else None,
            fraction_evaluate=cfg["evaluate_fraction"] if phase == "tappfl" else 0.0,
            min_train_nodes=1, min_evaluate_nodes=1, min_available_nodes=spec["num_clients"],
            progress=RoundLog(phase, rounds, history, cfg["progress"]), **strategy_settings(spec))
        config = phase_config(spec, phase)
        arrays = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=int(rounds), timeout=cfg["round_timeout_s"],
                                train_config=config, evaluate_config=config).arrays
    out = Path(spec["out_dir"])
    torch.save(arrays.to_torch_state_dict(), out / FEATURE_FILE)
    (out / HISTORY_FILE).write_text(json.dumps(history, indent=2))


def simulation_apps(spec: dict):
    """(ServerApp, ClientApp) for flwr.simulation.run_simulation (federated.simulate's factory)."""
    from flwr.serverapp import ServerApp
    server = ServerApp()

    @server.main()
    def main(grid, context) -> None:
        run_server(grid, spec)
    return server, flower_apps()["client_app"]


@functools.lru_cache(maxsize=1)
def flower_apps() -> dict:
    """The ClientApp and the deployment ServerApp (its spec comes from the run config of `flwr run`)."""
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    client, server = ClientApp(), ServerApp()
    client.train()(device_train)
    client.evaluate()(device_evaluate)

    @server.main()
    def main(grid, context) -> None:
        run_server(grid, json.loads(str(context.run_config["spec"])))
    return {"client_app": client, "server_app": server}


# -- running a federation from train() -----------------------------------------------------------
def federation_spec(data: SensorDataset, base: dict, useful: str, private: str, config: TAPPFLConfig, out: Path) -> dict:
    model = {"input_dim": int(np.prod(base["model_shape"])), "representation_dim": int(config.representation_dim),
             "n_private": int(data.num_classes[private])}
    task = {"dataset": base["dataset"], "useful": useful, "private": private, "seed": int(config.seed),
            "partition": config.partition, "alpha": float(config.alpha), "partition_by": config.partition_by,
            "model": model}
    settings = asdict(config)
    if config.pretrained:   # the ServerApp may run in another working directory (deployment)
        settings["pretrained"] = str(pretrained_path(config.pretrained).resolve())
    largest = max(len(part) for part in device_partitions(data, useful, private, config))
    return {"task": task, "config": settings, "num_clients": int(config.clients), "cpus": int(config.cpus),
            "limits": {"max_examples": int(config.max_examples or largest)}, "out_dir": str(Path(out).resolve())}


def federate(spec: dict, out: Path, config: TAPPFLConfig) -> float:
    """Run the federation the config names; returns its wall time in seconds."""
    (out / FEATURE_FILE).unlink(missing_ok=True)   # never read a feature extractor an earlier run left
    if config.federation == "simulation":
        seconds = federated.simulate(SIMULATION_APPS, spec, out, config.timeout_s)
    elif config.federation == "deployment":
        if not config.superlink:
            raise ValueError("federation=deployment needs superlink=NAME, a SuperLink connection in "
                             "$FLWR_HOME/config.toml (README, TAPPFL)")
        app = federated.write_flower_app(out / "flower-app", SERVER_APP, CLIENT_APP, {"spec": json.dumps(spec)})
        started = time.time()
        federated.flwr_run(app, config.superlink, config.timeout_s, log_path=out / "flwr-run.log",
                           echo=(lambda line: "[tappfl]" in line) if config.progress else None)
        seconds = time.time() - started
    else:
        raise ValueError(f"federation={config.federation!r}; expected 'simulation' or 'deployment'")
    if not (out / FEATURE_FILE).is_file():
        raise federated.FederationError(f"the federation finished without writing {out / FEATURE_FILE}; the "
                                        "ServerApp failed (see the log above or `flwr log`)")
    return seconds


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


# -- evaluation: attackers trained on the released representations ---------------------------------
def representation_release(task: Task, represent) -> Release:
    """What the honest-but-curious server sees (the paper's threat model): r = f(x) for every row of
    the shared protocol, with the true labels. The task's x becomes r, so every attacker of the audit
    (sensorveil.sdk.audit) is built for a vector of the representation's width."""
    r = apply_privatize(represent, task.x)
    task = dataclasses.replace(task, x=r, modality="vector")
    return Release(task=task, train=r[task.attacker_train], test=r[task.test])


def score(release: Release, attacker_epochs: int, seed: int, prefix: str = "") -> dict:
    """Table 2's figures for one release: primary-task test accuracy, attribute inference accuracy (a
    neural attacker and extra-trees, both trained on the released split) and its gap to random
    guessing 1/K, the baseline of Table 2's Gap column."""
    task, train_x, test_x = release.task, release.train, release.test
    useful = probing_attack(task, train_x, test_x, task.useful, task.n_useful, attacker_epochs, seed + 1,
                            "primary task (utility probe)")
    private = probing_attack(task, train_x, test_x, task.private, task.n_private, attacker_epochs, seed,
                             "attribute inference (neural)")
    tree = tree_attacker_accuracy(train_x.numpy(), task.private[task.attacker_train], test_x.numpy(),
                                  task.private[task.test], seed)
    guess = 1.0 / task.n_private
    figures = {"probing_acc_useful": useful, "probing_acc_private": private, "tree_acc_private": tree,
               "gap_private": private - guess, "tree_gap_private": tree - guess,
               "worst_gap_private": max(private, tree) - guess}
    return {prefix + key: value for key, value in figures.items()}


def reference_figures(task: Task) -> dict:
    """Random* and friends (evaluation.baselines) beside Table 2's random guess 1/K."""
    return {**baselines(task), "random_guess_private": 1.0 / task.n_private}


def raw_figures(task: Task, attacker_epochs: int, seed: int) -> dict:
    """The same attackers on the raw data: the 'no defence' reference."""
    return score(Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test]), attacker_epochs,
                 seed, prefix="raw_")


# -- the run directory and the bundle -------------------------------------------------------------
def representation_spec(dim: int) -> dict:
    """The bundle's output: a feature vector in [-1, 1]^d (tanh), no sensor units, identity normalization."""
    return {"name": "y", "sample_shape": [dim], "model_shape": [None, dim], "dtype": "float32",
            "sensor_range": [-1.0, 1.0], "normalization": {"offset": 0.0, "scale": 1.0},
            "units": "representation"}


def load_feature_extractor(run_dir, run: dict) -> nn.Module:
    f = feature_extractor(int(np.prod(run["model_shape"])), int(run["config"]["representation_dim"]))
    f.load_state_dict(torch.load(Path(run_dir) / run["weights_file"], weights_only=True))
    return f.eval()


def only_one(values, role: str) -> str:
    values = as_list(values)
    if len(values) != 1:
        raise ValueError(f"TAPPFL takes one {role} attribute, got {values}")
    return values[0]


def check_config(config: TAPPFLConfig, data: SensorDataset, private: str) -> None:
    if not 0.0 <= config.lam <= 1.0:
        raise ValueError(f"lam={config.lam}: eq. 7's lambda must lie in [0, 1]")
    if config.privacy_bound not in BOUNDS:
        raise ValueError(f"privacy_bound={config.privacy_bound!r}; expected one of {BOUNDS}")
    if not 0.0 < config.fraction <= 1.0 or not 0.0 <= config.evaluate_fraction <= 1.0:
        raise ValueError("fraction must lie in (0, 1] and evaluate_fraction in [0, 1]")
    if config.participation not in ("sampled", "all"):
        raise ValueError(f"participation={config.participation!r}; expected 'sampled' or 'all'")
    from sensorveil.sdk.federated_strategy import check_aggregation
    check_aggregation(config.aggregation, config.trim_fraction)
    if config.min_valid_replies < 0 or config.max_examples < 0 or not config.max_update_ratio >= 0:
        raise ValueError(f"min_valid_replies={config.min_valid_replies}, max_examples={config.max_examples}, "
                         f"max_update_ratio={config.max_update_ratio}: each must be >= 0 (0: the default rule)")
    by = config.partition_by or private
    if by not in data.attributes:
        raise ValueError(f"partition_by={by!r}: dataset {data.name!r} has no such attribute; expected one of "
                         f"{sorted(data.attributes)}")


class TAPPFLMechanism(Mechanism):
    """TAPPFL: a federated feature extractor whose representations hide one private attribute."""

    name = MECHANISM
    kind = "representation"
    summary = "TAPPFL federated privacy-preserving representation (eq. 2-7, Algorithm 1) on Flower"
    config_class = TAPPFLConfig

    def make_config(self, request: TrainRequest) -> TAPPFLConfig:
        config = super().make_config(request)
        config.rounds = request.epochs if request.epochs is not None else config.rounds
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = only_one(request.useful, "useful"), only_one(request.private, "private")
        config = self.make_config(request)
        check_config(config, request.data, private)
        out = Path(request.out)
        spec = federation_spec(request.data, request.base, useful, private, config, out)
        seconds = federate(spec, out, config)
        run = {**request.base, "useful": useful, "private": private, "seed": config.seed, "kind": self.kind,
               "output": representation_spec(config.representation_dim), "config": asdict(config),
               "weights_file": FEATURE_FILE,
               "federation": {"runtime": config.federation, "flower": flower_version(), "wall_seconds": round(seconds, 1),
                              "partition": partition_record(request.data, useful, private, config),
                              "rounds": json.loads((out / HISTORY_FILE).read_text())}}
        task, _ = self.task(out, run)
        run["reference"] = reference_figures(task)
        if config.reference_attacks:
            run["reference"].update(raw_figures(task, request.attacker_epochs, config.seed))
        run["metrics"] = self.evaluate_release(self.release(out, run), request.attacker_epochs, config.seed)
        return run

    def privatize(self, run_dir, run: dict):
        """f_Theta in torch: model units in, the representation out (what the device releases)."""
        return load_feature_extractor(run_dir, run)

    def release(self, run_dir, run: dict, privatizer=None) -> Release:
        """The representations of the protocol's rows, from the trained f or, given a loaded bundle,
        exactly as the device computes them (sensor units through the runtime)."""
        task, _ = self.task(run_dir, run)
        represent = bundle_privatize(privatizer) if privatizer is not None else self.privatize(run_dir, run)
        return representation_release(task, represent)

    @staticmethod
    def evaluate_release(release: Release, attacker_epochs: int, seed: int) -> dict:
        return {"n_attacker_train": int(len(release.task.attacker_train)), "n_test": int(len(release.task.test)),
                **score(release, attacker_epochs, seed)}

    def evaluate_run(self, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        release = self.release(run_dir, run)
        return {**reference_figures(release.task), **self.evaluate_release(release, attacker_epochs, run["seed"])}

    def evaluate_bundle(self, bundle_dir, backend: str, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        from sensorveil.runtime import Privatizer
        privatizer = Privatizer.load(bundle_dir, backend=backend)
        release = self.release(run_dir, run, privatizer)
        return {"backend": privatizer.backend_name, "emits": privatizer.emits, **reference_figures(release.task),
                **self.evaluate_release(release, attacker_epochs, run["seed"])}

    def graphs(self, run_dir, run: dict) -> dict:
        return {"model": Graph(load_feature_extractor(run_dir, run))}

    def bundle(self, run_dir, run: dict, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        cfg = run["config"]
        entry = {"name": MECHANISM, "kind": self.kind, "useful": run["useful"], "private": run["private"],
                 "output": f"representation r = f(x), {cfg['representation_dim']} float32 values in [-1, 1]; "
                           "not sensor units",
                 "parameters": {key: cfg[key] for key in ("lam", "privacy_bound", "representation_dim", "rounds",
                                                          "pretrain_rounds", "clients", "fraction", "participation", "local_epochs",
                                                          "batch_size", "lr", "partition", "alpha")}}
        return entry, [{"kind": "model", "graph": "model", "emits": "representation"}]


def flower_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("flwr")
    except PackageNotFoundError:
        return "not installed"


register(TAPPFLMechanism())
