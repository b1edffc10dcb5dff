"""PASS (Chen et al., ICML 2025): Private Attributes protection with Stochastic data Substitution.

Each input x is replaced by a sample x' of a substitute bank D_substitute (drawn from the
training split) with probability P(X'=x'|X=x) = softmax_x'(cos(f(x), g(x')) / tau) (eq. 2): f is
an embedding network, g a learnable embedding per substitute. Training minimises the loss of
eq. 3 built from L_S (eq. 4-5, private attributes), L_U (eq. 6-7, useful attributes) and L_X
(eq. 8, general features). The exported model is f with the cosine-similarity-and-softmax head
folded in (normalized g is a constant) and outputs P(X'|X); the runtime draws x' in numpy
(sensorveil.runtime.substitution).

Data protocol: the same three slices as PR-GAN (sensorveil.sdk.prgan.make_slices) so both are
scored on the same test rows by the same attackers: slices 1 and 2 are the defender's (and the
probing attacker's) training split, slice 3 is the test split. Datasets that carry their own
split (MotionSense's "trial" split, attribute ``trial_split``) use it instead.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import make_slices
from sensorveil.sdk.training import apply, batches, model_shape, set_seed, to_model, tqdm

MECHANISM = "pass"
WEIGHTS_FILE = "embedding.pt"
BANK_FILE = "bank_indices.npy"           # bank position -> row of the recorded dataset
SAMPLES_FILE = "substitutes.npy"         # bank position -> substitute sample, sensor units
SPLIT_ATTRIBUTE = "trial_split"          # a dataset's own train (0) / test (1) split, if it has one
# Epochs per dataset that keep one training run to a few minutes on a 2-core CPU.
DEFAULT_EPOCHS = {"digits": 150, "ujiindoorloc": 10, "synthetic-depth": 60, "motionsense": 30}


@dataclass
class PASSConfig:
    tau: float = 0.01                  # eq. 2 temperature (section 4.1: 0.01 for all experiments)
    substitutes: int = 4096            # |D_substitute| (section 5.1), capped at the training split's size
    embedding_dim: int = 512           # Table 6
    lam: float | None = None           # lambda of eq. 3; None -> N / M (section 5.1)
    mu: float | None = None            # mu of eq. 3; None -> 0.2 N (section 5.1)
    epochs: int | None = None          # None -> DEFAULT_EPOCHS for the dataset (else 50)
    batch_size: int = 256
    lr: float = 1e-3                   # Table 6: AdamW, lr 1e-3, weight decay 1e-4, cosine schedule
    weight_decay: float = 1e-4
    seed: int = 0
    progress: bool = True


# -- embedding networks f (Table 6: MLP for features, CNN for sensor windows and images) -------
def mlp_embedding(dim: int, out: int) -> nn.Module:
    """3-layer MLP (Table 6, AudioMNIST column) for feature vectors such as WiFi fingerprints."""
    return nn.Sequential(nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, out))


def window_embedding(channels: int, out: int) -> nn.Module:
    """6-layer 1-D CNN (Table 6, Motion Sense column) for (channels, time) sensor windows. The
    leading BatchNorm learns the per-channel standardisation of appendix E.1 inside the graph."""
    def block(cin, cout, pool):
        layers = [nn.Conv1d(cin, cout, 5, padding=2), nn.ReLU()]
        return layers + ([nn.MaxPool1d(2)] if pool else [])
    return nn.Sequential(nn.Flatten(1, 2), nn.BatchNorm1d(channels),
                         *block(channels, 32, False), *block(32, 32, True), *block(32, 64, False),
                         *block(64, 64, True), *block(64, 128, False), *block(128, 128, False),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(128, out))


def small_image_embedding(side: int, out: int) -> nn.Module:
    """Conv net for small images (8x8 digits): one stride-2 conv, then a 2-layer MLP head."""
    half = (side + 1) // 2
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(64 * half * half, 256), nn.ReLU(), nn.Linear(256, out))


def depth_embedding(out: int) -> nn.Module:
    """Conv net for depth frames: four stride-2 convs and a pooled 2-layer MLP head (a small stand-in
    for Table 6's pre-trained backbone followed by a 2-layer MLP)."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                         nn.Linear(64 * 16, 256), nn.ReLU(), nn.Linear(256, out))


def make_embedding(modality: str, shape: tuple, out: int) -> nn.Module:
    if modality == "vector":
        return mlp_embedding(shape[0], out)
    if modality == "timeseries":
        return window_embedding(shape[-2], out)
    if modality == "depth" or shape[-1] >= 64:
        return depth_embedding(out)
    return small_image_embedding(shape[-1], out)


def cosine_logits(features: torch.Tensor, g_unit: torch.Tensor, tau: float) -> torch.Tensor:
    """cos(f(x), g(x')) / tau for every substitute x' (eq. 2's exponent); g_unit rows have norm 1."""
    return F.normalize(features, dim=1) @ g_unit.T / tau


class SubstitutionModel(nn.Module):
    """f and the learnable substitute embeddings g: log P(X'|X) of eq. 2 for training."""

    def __init__(self, embed: nn.Module, bank_size: int, dim: int, tau: float):
        super().__init__()
        self.embed = embed
        self.g = nn.Parameter(torch.randn(bank_size, dim))
        self.tau = tau

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(cosine_logits(self.embed(x), F.normalize(self.g, dim=1), self.tau), dim=1)


class SubstitutionHead(nn.Module):
    """What the bundle carries: x -> P(X'|X=x) (eq. 2), f with the head folded in and normalized g
    as a constant, so the device computes one graph and only the sampling is left to numpy."""

    def __init__(self, model: SubstitutionModel):
        super().__init__()
        self.embed = model.embed
        self.register_buffer("g_unit", F.normalize(model.g.detach(), dim=1))
        self.tau = model.tau

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(cosine_logits(self.embed(x), self.g_unit, self.tau), dim=1)


# -- the loss, eq. 3-8 --------------------------------------------------------------------------
def row_entropy(log_p: torch.Tensor) -> torch.Tensor:
    return -(log_p.exp() * log_p).sum(-1)


def private_loss(log_p: torch.Tensor, s: torch.Tensor, n_classes: int) -> torch.Tensor:
    """eq. 4: L_S = -E_{P(S)}[H(X'|S)], with eq. 5's P(X'|S=c) the mean of P(X'|x) over the batch's
    x of class c, and P(S=c) the batch share of class c. All classes at once: one (classes x batch)
    by (batch x bank) product instead of a loop, since attributes such as regions have 100+ classes."""
    onehot = F.one_hot(s, n_classes).T.to(log_p.dtype)                   # (classes, batch)
    counts = onehot.sum(1)
    present = counts > 0
    mix = (onehot[present] @ log_p.exp()) / counts[present, None]         # P(X'|S=c), eq. 5
    entropy = -(mix * torch.log(mix.clamp_min(1e-30))).sum(1)            # H(X'|S=c)
    return -(counts[present] / len(s) * entropy).sum()


def useful_loss(log_p: torch.Tensor, u: torch.Tensor, bank_u: torch.Tensor, n_classes: int) -> torch.Tensor:
    """eq. 6: L_U = log|U| E[-log P(U'=U|X)], with eq. 7's P(U'=u|x) = sum of P(x'|x) over the
    substitutes x' whose own label U' is u."""
    match = bank_u[None, :] == u[:, None]
    covered = match.any(1)                                   # a class absent from the bank has no x'
    log_pu = torch.logsumexp(log_p[covered].masked_fill(~match[covered], float("-inf")), dim=1)
    return math.log(n_classes) * (-log_pu).mean()


def general_loss(log_p: torch.Tensor) -> torch.Tensor:
    """eq. 8: L_X = E[H(X'|X)]."""
    return row_entropy(log_p).mean()


def pass_loss(log_p, private: list, private_classes: list, useful: list, bank_useful: list, useful_classes: list,
              lam: float, mu: float) -> tuple[torch.Tensor, dict]:
    """eq. 3 combined with the signs of its derivation (eq. 29 and 37): L = sum L_S + lambda sum L_U
    + mu L_X. Eq. 3 as printed subtracts the last two terms, but section 4.2 minimises L_U and L_X
    and eq. 37 bounds L by E[L_S] + lambda E[L_U] + mu E[L_X] + C, so they are added here."""
    l_s = sum((private_loss(log_p, s, k) for s, k in zip(private, private_classes)), log_p.new_zeros(()))
    l_u = sum((useful_loss(log_p, u, bu, k) for u, bu, k in zip(useful, bank_useful, useful_classes)),
              log_p.new_zeros(()))
    l_x = general_loss(log_p)
    total = l_s + lam * l_u + mu * l_x
    parts = {"L_hat": total, "L_S": l_s, "L_U": l_u, "L_X": l_x}
    return total, {name: float(value.detach()) for name, value in parts.items()}


def constant_c(n_private: int, mu: float, lam: float, bank_size: int, useful_labels: list) -> float:
    """eq. 10: C = (M - mu) log|D_substitute| - lambda sum_j H(U_j) + lambda N, so E[L_hat] + C >= L
    (eq. 9). Entropies in nats. Eq. 10 prints "+ lambda", which is eq. 29's lambda sum_j 1 for N = 1;
    for N useful attributes the derivation gives lambda N."""
    entropies = []
    for labels in useful_labels:
        p = np.bincount(labels) / len(labels)
        p = p[p > 0]
        entropies.append(float(-(p * np.log(p)).sum()))
    return (n_private - mu) * math.log(bank_size) - lam * sum(entropies) + lam * len(useful_labels)


# -- data and training ---------------------------------------------------------------------------
@dataclass
class PassData:
    """The dataset in model units, the task's attributes, the train/test rows and the bank rows."""
    dataset: SensorDataset
    useful: list
    private: list
    hidden: list
    x: torch.Tensor = field(repr=False)
    train_rows: np.ndarray = field(repr=False)
    test_rows: np.ndarray = field(repr=False)
    bank_rows: np.ndarray = field(repr=False)

    def labels(self, attribute: str) -> np.ndarray:
        return self.dataset.attributes[attribute]

    def classes(self, attribute: str) -> int:
        return int(self.dataset.num_classes[attribute])


def as_list(value) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def check_attributes(dataset: SensorDataset, useful: list, private: list, hidden: list) -> None:
    if not useful or not private:
        raise ValueError("PASS needs at least one useful and one private attribute (--useful A ... --private B ...)")
    names = useful + private + hidden
    unknown = [a for a in names if a not in dataset.attributes or a == SPLIT_ATTRIBUTE]
    if unknown:
        raise ValueError(f"dataset {dataset.name!r} has no attribute(s) {unknown}; expected from "
                         f"{sorted(set(dataset.attributes) - {SPLIT_ATTRIBUTE})}")
    repeated = sorted({a for a in names if names.count(a) > 1})
    if repeated:
        raise ValueError(f"attribute(s) {repeated} given more than one role; each is private, useful or hidden")


def split_rows(dataset: SensorDataset, useful: str, private: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) rows: the dataset's own split when it has one, else PR-GAN's three slices."""
    if SPLIT_ATTRIBUTE in dataset.attributes:
        split = dataset.attributes[SPLIT_ATTRIBUTE]
        return np.flatnonzero(split == 0), np.flatnonzero(split == 1)
    slices = make_slices(dataset.attributes[useful], dataset.attributes[private],
                         dataset.num_classes[private], seed)
    # the rows PR-GAN's probing attacker trains on (evaluation.Task.attacker_train), in the same order
    train = np.concatenate([slices["classifiers"], slices["generator_train"], slices["generator_val"]])
    return train, slices["test"]


def prepare_data(dataset: SensorDataset, useful, private, hidden=None, substitutes: int = 4096,
                 seed: int = 0, bank_rows: np.ndarray | None = None) -> PassData:
    """Splits and the substitute bank (section 5.1: sampled at random from the training split)."""
    useful, private, hidden = as_list(useful), as_list(private), as_list(hidden)
    check_attributes(dataset, useful, private, hidden)
    if substitutes < 1:
        raise ValueError(f"--substitutes must be >= 1, got {substitutes}")
    train, test = split_rows(dataset, useful[0], private[0], seed)
    if bank_rows is None:
        size = min(int(substitutes), len(train))
        bank_rows = np.sort(np.random.default_rng([seed, 4096]).choice(train, size=size, replace=False))
    return PassData(dataset=dataset, useful=useful, private=private, hidden=hidden, x=to_model(dataset),
                    train_rows=train, test_rows=test, bank_rows=np.asarray(bank_rows, dtype=np.int64))


def resolved_weights(config: PASSConfig, n_useful: int, n_private: int) -> tuple[float, float]:
    """Section 5.1's defaults lambda = N / M and mu = 0.2 N (N useful, M private attributes)."""
    lam = config.lam if config.lam is not None else n_useful / n_private
    mu = config.mu if config.mu is not None else 0.2 * n_useful
    return float(lam), float(mu)


def fit(data: PassData, config: PASSConfig) -> tuple[SubstitutionModel, dict]:
    """Algorithm 1: mini-batches of the training split, eq. 2 then eq. 3, AdamW + cosine schedule."""
    set_seed(config.seed)
    lam, mu = resolved_weights(config, len(data.useful), len(data.private))
    epochs = config.epochs or DEFAULT_EPOCHS.get(data.dataset.name, 50)
    model = SubstitutionModel(make_embedding(data.dataset.modality, model_shape(data.dataset), config.embedding_dim),
                              len(data.bank_rows), config.embedding_dim, config.tau)
    rows = data.train_rows
    x = data.x[rows]
    tensor = lambda attr, idx: torch.as_tensor(data.labels(attr)[idx], dtype=torch.long)  # noqa: E731
    private = [tensor(a, rows) for a in data.private]
    useful = [tensor(a, rows) for a in data.useful]
    bank_useful = [tensor(a, data.bank_rows) for a in data.useful]
    useful_classes = [data.classes(a) for a in data.useful]
    private_classes = [data.classes(a) for a in data.private]
    c = constant_c(len(data.private), mu, lam, len(data.bank_rows), [data.labels(a)[rows] for a in data.useful])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = epochs * math.ceil(len(rows) / config.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    generator = torch.Generator().manual_seed(config.seed)
    history, started = [], time.time()
    for epoch in tqdm(range(epochs), desc="PASS f, g", leave=False, disable=not config.progress):
        model.train()
        sums, count = {}, 0
        for idx in batches(len(rows), config.batch_size, generator):
            loss, parts = pass_loss(model(x[idx]), [s[idx] for s in private], private_classes,
                                    [u[idx] for u in useful], bank_useful, useful_classes, lam, mu)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
            count += 1
        history.append({"epoch": epoch + 1, **{k: v / count for k, v in sums.items()}})
        history[-1]["L_hat_plus_C"] = history[-1]["L_hat"] + c     # tracks the bound on L (eq. 9)
    record = {"lambda": lam, "mu": mu, "constant_C": c, "epochs": epochs, "steps": steps,
              "bank_size": int(len(data.bank_rows)), "history": history,
              "fit_seconds": round(time.time() - started, 1)}
    return model.eval(), record


def probabilities(head: nn.Module, x: torch.Tensor) -> np.ndarray:
    """P(X'|X) for every row of x (model units), from the export head in torch."""
    return apply(head, x).numpy()


def config_dict(config: PASSConfig) -> dict:
    return asdict(config)


def config_from_dict(values: dict) -> PASSConfig:
    return PASSConfig(**{k: v for k, v in values.items() if k in PASSConfig.__dataclass_fields__})


# -- run directory ------------------------------------------------------------------------------
def train_pass_run(base: dict, data: SensorDataset, out: Path, config: PASSConfig, hidden=None,
                   attacker_epochs: int = 20, plots: bool = True) -> dict:
    """Train, evaluate under the probing attack, and write weights + bank into ``out``.
    ``base`` is the run record sensorveil.sdk.runs built (dataset record, specs, ...); the
    completed record is returned for runs to write as run.json."""
    from sensorveil.sdk import pass_eval
    started = time.time()
    pdata = prepare_data(data, base["useful"], base["private"], hidden, config.substitutes, config.seed)
    model, training = fit(pdata, config)
    torch.save(model.state_dict(), out / WEIGHTS_FILE)
    np.save(out / BANK_FILE, pdata.bank_rows, allow_pickle=False)
    head = SubstitutionHead(model).eval()
    evaluation = pass_eval.evaluate_model(pdata, head, attacker_epochs=attacker_epochs, seed=config.seed,
                                          plot_dir=out if plots else None)
    return {**base, "kind": "substitution", "hidden": pdata.hidden, "config": config_dict(config),
            "substitution": {"tau": config.tau, "bank_size": int(len(pdata.bank_rows)), "bank_file": BANK_FILE,
                             "weights_file": WEIGHTS_FILE, "lambda": training["lambda"], "mu": training["mu"],
                             "constant_C": training["constant_C"], "embedding_dim": config.embedding_dim},
            "training": training, "reference": evaluation["reference"], "metrics": evaluation["metrics"],
            "confusion_plot": evaluation.get("confusion_plot"), "train_seconds": round(time.time() - started, 1)}


def load_model(run_dir, run: dict) -> SubstitutionModel:
    sub = run["substitution"]
    model = SubstitutionModel(make_embedding(run["modality"], tuple(run["model_shape"]), sub["embedding_dim"]),
                              sub["bank_size"], sub["embedding_dim"], sub["tau"])
    model.load_state_dict(torch.load(Path(run_dir) / sub["weights_file"], weights_only=True))
    return model.eval()


def load_head(run_dir, run: dict) -> SubstitutionHead:
    """The module to export: f with the similarity-and-softmax head folded in."""
    return SubstitutionHead(load_model(run_dir, run)).eval()


def load_bank_rows(run_dir, run: dict) -> np.ndarray:
    return np.load(Path(run_dir) / run["substitution"]["bank_file"], allow_pickle=False)


def write_bundle_files(run_dir, run: dict, dataset: SensorDataset, out_dir: Path, include_samples: bool) -> dict:
    """The bank files the runtime needs and the manifest's mechanism entry (kind "substitution")."""
    bank_rows = load_bank_rows(run_dir, run)
    np.save(out_dir / BANK_FILE, bank_rows, allow_pickle=False)
    if include_samples:     # the substitute samples in sensor units, for output="sample"
        np.save(out_dir / SAMPLES_FILE, np.ascontiguousarray(dataset.x[bank_rows]), allow_pickle=False)
    sub = run["substitution"]
    return {"name": run["mechanism"], "kind": "substitution", "useful": run["useful"], "private": run["private"],
            "hidden": run.get("hidden", []),
            "parameters": {"tau": sub["tau"], "lambda": sub["lambda"], "mu": sub["mu"],
                           "constant_C": sub["constant_C"], "embedding_dim": sub["embedding_dim"]},
            "substitution": {"bank_size": int(len(bank_rows)), "bank_indices": BANK_FILE,
                             "bank_samples": SAMPLES_FILE if include_samples else None,
                             "output_default": "sample" if include_samples else "index",
                             "model_output": "P(X'|X), shape (batch, bank_size), rows sum to 1 (eq. 2)",
                             "bank_indices_meaning": "bank position -> row of the dataset record"}}
