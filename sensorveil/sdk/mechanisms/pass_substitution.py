"""PASS (Chen et al., ICML 2025): Private Attributes protection with Stochastic data Substitution.

Each input x is replaced by a sample x' of a substitute bank D_substitute (drawn from the
training split) with probability P(X'=x'|X=x) = softmax_x'(cos(f(x), g(x')) / tau) (eq. 2): f is
an embedding network, g a learnable embedding per substitute. Training minimises the loss of
eq. 3 built from L_S (eq. 4-5, private attributes), L_U (eq. 6-7, useful attributes) and L_X
(eq. 8, general features). The exported model is f with the cosine-similarity head folded in
(normalized g is a constant) and outputs eq. 2's logits; the runtime takes their softmax and draws x' in numpy
(sensorveil.runtime.stages.substitution).

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

from sensorveil.runtime.stages.substitution import draw_indices, restrict_to_known
from sensorveil.sdk.audit import Release
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import Task, baselines, make_slices, probing_attack, tree_attacker_accuracy
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import Graph, Mechanism, TrainRequest, as_list, load_run_dataset
from sensorveil.sdk.networks import DepthClassifier, make_classifier
from sensorveil.sdk.priors import maximum_entropy_distribution
from sensorveil.sdk.training import (accuracy, apply, batches, model_shape, progress_bar, set_seed, to_model,
                                     train_classifier)

MECHANISM = "pass"
WEIGHTS_FILE = "embedding.pt"
BANK_FILE = "bank_indices.npy"           # bank position -> row of the recorded dataset
CONDITION_FILE = "bank_condition.npy"    # bank position -> its value of the condition attribute
SAMPLES_FILE = "substitutes.npy"         # bank position -> substitute sample, sensor units
SEQUENCE_FILE = "bank_next.npy"          # bank position -> the same person's next crop in the bank
SPLIT_ATTRIBUTE = "trial_split"          # a dataset's own train (0) / test (1) split, if it has one
# Epochs per dataset that keep one training run to a few minutes on a 2-core CPU.
DEFAULT_EPOCHS = {"digits": 150, "ujiindoorloc": 10, "synthetic-depth": 40, "motionsense": 30,
                  "walkway": 30}
# Epochs of pre-training f as a classifier of the useful attributes before eq. 3 (PASSConfig.pretrain_epochs).
# The paper starts f from a pre-trained backbone (Table 6); from a random f, synthetic depth's P(X'|X)
# collapsed to one distribution for every input (L_S is at its minimum when every substitute is equally
# likely, and f never learned facing: mNAG -0.3%). Other datasets train from a random f, as measured.
DEFAULT_PRETRAIN = {"synthetic-depth": 4}


@dataclass
class PASSConfig:
    tau: float = 0.01                  # eq. 2 temperature (section 4.1: 0.01 for all experiments)
    substitutes: int = 4096            # |D_substitute| (section 5.1), capped at the training split's size
    embedding_dim: int = 512           # Table 6
    lam: float | None = None           # lambda of eq. 3; None -> N / M (section 5.1)
    mu: float | None = None            # mu of eq. 3; None -> 0.2 N (section 5.1)
    epochs: int | None = None          # None -> DEFAULT_EPOCHS for the dataset (else 50)
    pretrain_epochs: int | None = None # None -> DEFAULT_PRETRAIN for the dataset (else 0)
    batch_size: int = 256
    lr: float = 1e-3                   # Table 6: AdamW, lr 1e-3, weight decay 1e-4, cosine schedule
    weight_decay: float = 1e-4
    # an attribute the device itself measures for every sample (walkway: the tracker's walking
    # direction): the draw is restricted to bank entries sharing its value, in training and on the device
    condition: str | None = None
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


def large_image_embedding(out: int) -> nn.Module:
    """Conv net for camera crops (grey, 0 a valid value): four stride-2 convs and a pooled 2-layer MLP
    head (a small stand-in for Table 6's pre-trained backbone followed by a 2-layer MLP)."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                         nn.Linear(64 * 16, 256), nn.ReLU(), nn.Linear(256, out))


def depth_embedding(out: int) -> nn.Module:
    """f for depth frames: the depth classifier's network (learnable depth levels, invalid pixels
    masked, convs beside the height profile) with ``out`` outputs. The plain conv stack above cannot
    resolve the absolute heights that tell people apart and what a head's front looks like, so P(X'|X)
    collapsed to one distribution for every input (PASS's utility gone, mNAG 0)."""
    return DepthClassifier(out)


def make_embedding(modality: str, shape: tuple, out: int) -> nn.Module:
    if modality == "vector":
        return mlp_embedding(shape[0], out)
    if modality == "timeseries":
        return window_embedding(shape[-2], out)
    if modality == "depth":
        return depth_embedding(out)
    if shape[-1] >= 64:
        return large_image_embedding(out)
    return small_image_embedding(shape[-1], out)


def unit_rows(features: torch.Tensor) -> torch.Tensor:
    """Rows scaled to norm 1, as x * rsqrt(sum x^2): MUL, SUM and RSQRT quantize to int8 and map
    onto the Edge TPU, where F.normalize's ABS, SQRT and DIV stay on the CPU in float."""
    return features * torch.rsqrt((features * features).sum(dim=1, keepdim=True) + 1e-12)


def cosine_logits(features: torch.Tensor, g_unit: torch.Tensor, tau: float) -> torch.Tensor:
    """cos(f(x), g(x')) / tau for every substitute x' (eq. 2's exponent); g_unit rows have norm 1."""
    return unit_rows(features) @ (g_unit / tau).T


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
    """What the bundle carries: x -> the logits cos(f(x), g(x'))/tau of eq. 2, f with the head folded
    in and normalized g as a constant. The softmax and the draw happen in numpy on the device
    (sensorveil.runtime.stages.substitution): at tau = 0.01 the probabilities span many orders of
    magnitude, which an int8 softmax output (steps of 1/256) would round to zero, while the logits
    quantize with steps of a fraction of a nat."""

    def __init__(self, model: SubstitutionModel):
        super().__init__()
        self.embed = model.embed
        self.register_buffer("g_unit", F.normalize(model.g.detach(), dim=1))
        self.tau = model.tau
        self.validation_scale = model.tau   # the export compares logits * tau = cosines (exporter.compared_units)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cosine_logits(self.embed(x), self.g_unit, self.tau)


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
    condition: str | None = None      # PASSConfig.condition

    def labels(self, attribute: str) -> np.ndarray:
        return self.dataset.attributes[attribute]

    def known(self, rows: np.ndarray) -> np.ndarray | None:
        """The condition attribute's value of ``rows``: what the device knows of those samples."""
        return None if self.condition is None else self.labels(self.condition)[rows]

    def conditioned(self, probs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """P(X'|X) of ``rows`` restricted as the device restricts it (runtime's restrict_to_known)."""
        if self.condition is None:
            return probs
        return restrict_to_known(probs, self.labels(self.condition)[self.bank_rows], self.known(rows))

    def classes(self, attribute: str) -> int:
        return int(self.dataset.num_classes[attribute])


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
                 seed: int = 0, bank_rows: np.ndarray | None = None, condition: str | None = None) -> PassData:
    """Splits and the substitute bank (section 5.1: sampled at random from the training split)."""
    useful, private, hidden = as_list(useful), as_list(private), as_list(hidden)
    check_attributes(dataset, useful, private, hidden)
    if condition is not None and condition not in dataset.attributes:
        raise ValueError(f"condition {condition!r} is not an attribute of {dataset.name!r}; expected one of "
                         f"{sorted(dataset.attributes)}")
    if substitutes < 1:
        raise ValueError(f"--substitutes must be >= 1, got {substitutes}")
    train, test = split_rows(dataset, useful[0], private[0], seed)
    if bank_rows is None:
        size = min(int(substitutes), len(train))
        bank_rows = np.sort(np.random.default_rng([seed, 4096]).choice(train, size=size, replace=False))
    return PassData(dataset=dataset, useful=useful, private=private, hidden=hidden, x=to_model(dataset),
                    train_rows=train, test_rows=test, bank_rows=np.asarray(bank_rows, dtype=np.int64),
                    condition=condition)


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
    pretrain = pretrain_epochs(config, data.dataset.name)
    if pretrain:
        pretrain_embedding(model, data, pretrain, config)
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
    excluded = conditioned_out(data, rows)
    history, started = [], time.time()
    for epoch in progress_bar(range(epochs), "PASS f, g", config.progress):
        model.train()
        sums, count = {}, 0
        for idx in batches(len(rows), config.batch_size, generator):
            log_p = model(x[idx])
            if excluded is not None:   # P(X'|X) renormalized over the substitutes the draw may pick
                log_p = F.log_softmax(log_p.masked_fill(excluded[idx], -1e4), dim=1)
            loss, parts = pass_loss(log_p, [s[idx] for s in private], private_classes,
                                    [u[idx] for u in useful], bank_useful, useful_classes, lam, mu)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
            count += 1
        history.append({"epoch": epoch + 1, **{k: v / count for k, v in sums.items()}})
        history[-1]["L_hat_plus_C"] = history[-1]["L_hat"] + c     # tracks the bound on L (eq. 9)
    record = {"lambda": lam, "mu": mu, "constant_C": c, "epochs": epochs, "pretrain_epochs": pretrain, "steps": steps,
              "bank_size": int(len(data.bank_rows)), "history": history,
              "fit_seconds": round(time.time() - started, 1)}
    return model.eval(), record


def pretrain_epochs(config: PASSConfig, dataset: str) -> int:
    epochs = config.pretrain_epochs if config.pretrain_epochs is not None else DEFAULT_PRETRAIN.get(dataset, 0)
    if epochs < 0:
        raise ValueError(f"pretrain_epochs must be >= 0, got {epochs}")
    return int(epochs)


def pretrain_embedding(model: SubstitutionModel, data: PassData, epochs: int, config: PASSConfig) -> None:
    """f trained as a classifier of the useful attributes (one joint label, a linear read-out that is
    then dropped), then each substitute's g set to f of its own sample: training on eq. 3 starts where
    P(X'|X) already favours substitutes that look like x, most of all in what is useful. The paper's
    f starts from a pre-trained backbone (Table 6); g's initial value is not given there."""
    labels, classes = joint_code(data, data.useful)
    classifier = nn.Sequential(model.embed, nn.Linear(config.embedding_dim, classes))
    train_classifier(classifier, data.x[data.train_rows], labels[data.train_rows], epochs=epochs,
                     desc="PASS f pre-training", progress=config.progress, seed=config.seed,
                     lr_schedule="cosine")
    with torch.no_grad():
        model.g.copy_(apply(model.embed, data.x[data.bank_rows]))


def conditioned_out(data: PassData, rows: np.ndarray) -> torch.Tensor | None:
    """(rows, bank) True where the device's conditioned draw can never pick that substitute for that row."""
    if data.condition is None:
        return None
    ones = np.ones((len(rows), len(data.bank_rows)))
    return torch.as_tensor(data.conditioned(ones, rows) == 0)


def probabilities(head: nn.Module, x: torch.Tensor) -> np.ndarray:
    """P(X'|X) for every row of x (model units): the softmax of the export head's logits (eq. 2)."""
    return torch.softmax(apply(head, x).double(), dim=1).numpy()


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
    started = time.time()
    pdata = prepare_data(data, base["useful"], base["private"], hidden, config.substitutes, config.seed,
                         condition=config.condition)
    model, training = fit(pdata, config)
    torch.save(model.state_dict(), out / WEIGHTS_FILE)
    np.save(out / BANK_FILE, pdata.bank_rows, allow_pickle=False)
    head = SubstitutionHead(model).eval()
    evaluation = evaluate_model(pdata, head, attacker_epochs=attacker_epochs, seed=config.seed,
                                          plot_dir=out if plots else None)
    return {**base, "kind": "substitution", "hidden": pdata.hidden, "config": config_dict(config),
            "substitution": {"tau": config.tau, "bank_size": int(len(pdata.bank_rows)), "bank_file": BANK_FILE,
                             "weights_file": WEIGHTS_FILE, "lambda": training["lambda"], "mu": training["mu"],
                             "constant_C": training["constant_C"], "embedding_dim": config.embedding_dim,
                             "condition": config.condition},
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


def substitute_samples(dataset: SensorDataset, bank_rows: np.ndarray) -> np.ndarray:
    """The bank's samples as the device emits them. Camera crops with a foreground mask become cut-outs:
    the person's pixels (at least 1), 0 elsewhere, so the device pastes a person, not a rectangle of
    somebody else's background (runtime camera "cut-out" paste). Each cut-out keeps only its largest
    blob with small gaps closed (runtime camera.clean_cut_out): pasted with the pieces of neighbours and
    the holes a detector's mask has, a substitute split or failed a downstream counter's shape rules."""
    samples = dataset.x[bank_rows]
    if dataset.foreground is None:
        return np.ascontiguousarray(samples)
    from sensorveil.runtime.camera import clean_cut_out
    cut_outs = np.where(dataset.foreground[bank_rows], np.maximum(samples, 1), 0).astype(np.uint8)
    return np.stack([clean_cut_out(c) for c in cut_outs]).astype(samples.dtype)


def write_bundle_files(run_dir, run: dict, dataset: SensorDataset, out_dir: Path, include_samples: bool) -> tuple:
    """The bank files the runtime needs, the manifest's mechanism entry, and the pipeline: f with its
    similarity head (P(X'|X)), then the draw (sensorveil.runtime.stages.substitution)."""
    bank_rows = load_bank_rows(run_dir, run)
    np.save(out_dir / BANK_FILE, bank_rows, allow_pickle=False)
    if include_samples:     # the substitute samples in sensor units, for output="sample"
        np.save(out_dir / SAMPLES_FILE, substitute_samples(dataset, bank_rows), allow_pickle=False)
    sub = run["substitution"]
    entry = {"name": run["mechanism"], "kind": "substitution", "useful": run["useful"], "private": run["private"],
             "hidden": run.get("hidden", []),
             "parameters": {"tau": sub["tau"], "lambda": sub["lambda"], "mu": sub["mu"],
                            "constant_C": sub["constant_C"], "embedding_dim": sub["embedding_dim"]}}
    draw = {"kind": "substitution", "bank_size": int(len(bank_rows)), "bank_indices": BANK_FILE,
            "bank_samples": SAMPLES_FILE if include_samples else None,
            "output_default": "sample" if include_samples else "index",
            "model_output": "logits",
            "model_output_meaning": "cos(f(x), g(x'))/tau per substitute x', shape (batch, bank_size); "
                                    "P(X'|X) is their softmax (eq. 2)",
            "bank_indices_meaning": "bank position -> row of the dataset record",
            # camera crops: people cut out of their crops, 0 = not the person
            "cut_out": bool(include_samples and dataset.foreground is not None)}
    if sub.get("condition"):   # the device restricts the draw to substitutes that share what it knows
        np.save(out_dir / CONDITION_FILE, dataset.attributes[sub["condition"]][bank_rows].astype(np.int64),
                allow_pickle=False)
        draw["condition"] = {"attribute": sub["condition"], "bank_labels": CONDITION_FILE}
    if draw["cut_out"] and "track" in dataset.attributes:    # camera people: let held substitutes walk
        grouping = [dataset.attributes["track"][bank_rows]]
        if sub.get("condition"):
            grouping.append(dataset.attributes[sub["condition"]][bank_rows])
        np.save(out_dir / SEQUENCE_FILE, bank_sequences(bank_rows, *grouping), allow_pickle=False)
        draw["sequence"] = {"next": SEQUENCE_FILE, "frames_per_step": int((dataset.camera or {}).get("crop_every", 1))}
    return entry, [{"kind": "model", "graph": "model"}, draw]


def bank_sequences(bank_rows: np.ndarray, *groups: np.ndarray) -> np.ndarray:
    """Bank position -> the position of the same person's next crop: the next bank entry, in dataset
    order (a clip's crops are stored in frame order), that shares every one of ``groups`` (the track,
    and the condition value, so a walker keeps walking the way it was drawn for); a sequence's last
    entry leads back to its first."""
    following = np.arange(len(bank_rows))
    keys = np.stack(groups, axis=1) if groups else np.zeros((len(bank_rows), 1), np.int64)
    for key in np.unique(keys, axis=0):
        members = np.flatnonzero((keys == key).all(axis=1))
        members = members[np.argsort(bank_rows[members], kind="stable")]
        following[members] = np.roll(members, -1)
    return following


# -- evaluation (section 5.1, appendix F.2) ---------------------------------------------------
CONFUSION_PLOT = "substitution_confusion.png"
BATCH = 512


def nag(acc: float, acc_guessing: float, acc_no_suppr: float) -> float:
    """eq. 13: max(0, (Acc - Acc_guessing) / (Acc_no_suppr - Acc_guessing)); 0 when the raw-data
    classifier is no better than guessing (nothing to gain, nothing to lose)."""
    span = acc_no_suppr - acc_guessing
    return float(max(0.0, (acc - acc_guessing) / span)) if span > 0 else 0.0


def mnag(useful: list, hidden: list, private: list) -> float:
    """eq. 14: mean NAG of the useful and hidden useful attributes minus mean NAG of the private
    ones. (Eq. 14 as printed swaps M and N in the normalisers; the text defines the two averages.)"""
    kept = list(useful) + list(hidden)
    return float(np.mean(kept) - np.mean(private)) if kept and private else float("nan")


def joint_code(data: PassData, attributes: list) -> tuple[np.ndarray, int]:
    """All useful attributes as one label, for the best guess from what utility reveals."""
    code, size = np.zeros(len(data.dataset), dtype=np.int64), 1
    for attr in attributes:
        code, size = code * data.classes(attr) + data.labels(attr), size * data.classes(attr)
    return code, size


def attack_task(data: PassData, private: str) -> Task:
    """evaluation.Task for one private attribute: the attackers' rows, and the prior behind Random*."""
    useful, n_useful = joint_code(data, data.useful)
    n_private = data.classes(private)
    theta = data.dataset.prior(data.useful[0], private) if len(data.useful) == 1 else None
    return Task(x=data.x, useful=useful, private=data.labels(private), n_useful=n_useful, n_private=n_private,
                med=maximum_entropy_distribution(theta, n_useful, n_private), attacker_train=data.train_rows,
                test=data.test_rows, modality=data.dataset.modality)


def random_star(data: PassData, private: str) -> dict:
    """PR-GAN's Random* (best guess from the useful attribute and the public prior, evaluation.baselines)
    where a prior is known for a single useful attribute; otherwise the empirical best guess of the
    private label from the useful labels, learned from the training split."""
    figures = baselines(attack_task(data, private))
    known = len(data.useful) == 1 and data.dataset.prior(data.useful[0], private) is not None
    if not known:
        figures["random_star"] = figures["guess_from_useful"]
    figures["random_star_source"] = "public prior (MED, eq. 3)" if known else "empirical, from the useful labels"
    return figures


def reference(data: PassData, attacker_epochs: int, seed: int) -> tuple[dict, dict]:
    """Acc_no_suppr (a medium classifier on raw training data, scored on raw test data) and
    Acc_guessing (the training split's majority class) per attribute; the raw classifiers also give
    NAG-unfinetuned for useful attributes."""
    figures, classifiers = {}, {}
    shape = tuple(data.x.shape[1:])
    for i, attr in enumerate(data.useful + data.hidden + data.private):
        labels = data.labels(attr)
        net = make_classifier(data.dataset.modality, shape, data.classes(attr))
        torch.manual_seed(seed + i)
        train_classifier(net, data.x[data.train_rows], labels[data.train_rows], epochs=attacker_epochs,
                         desc=f"no-suppr classifier ({attr})", seed=seed + i)
        majority = np.bincount(labels[data.train_rows], minlength=data.classes(attr)).argmax()
        figures[attr] = {"acc_no_suppr": accuracy(net, data.x[data.test_rows], labels[data.test_rows]),
                         "acc_guessing": float((labels[data.test_rows] == majority).mean())}
        classifiers[attr] = net
    return figures, classifiers


def attribute_scores(data: PassData, attr: str, role: str, ref: dict, raw_net, train_x, test_x,
                     attacker_epochs: int, seed: int) -> dict:
    labels, task = data.labels(attr), attack_task(data, data.private[0])
    acc = probing_attack(task, train_x, test_x, labels, data.classes(attr), attacker_epochs, seed,
                         f"probing attacker ({attr})")
    row = {"role": role, **ref, "acc": acc, "nag": nag(acc, ref["acc_guessing"], ref["acc_no_suppr"])}
    if role == "private":
        row["tree_acc"] = tree_attacker_accuracy(train_x.numpy(), labels[data.train_rows], test_x.numpy(),
                                                 labels[data.test_rows], seed)
        row["tree_nag"] = nag(row["tree_acc"], ref["acc_guessing"], ref["acc_no_suppr"])
        row.update(random_star(data, attr))
    else:   # NAG-unfinetuned (section 5.3): the raw-data classifier, not retrained on substitutes
        row["acc_unfinetuned"] = accuracy(raw_net, test_x, labels[data.test_rows])
        row["nag_unfinetuned"] = nag(row["acc_unfinetuned"], ref["acc_guessing"], ref["acc_no_suppr"])
    return row


def confusion_matrices(data: PassData, test_probs: np.ndarray) -> dict:
    """Appendix F.2: entry (i, j) is the fraction of test samples of class i substituted by a
    substitute of class j, in expectation over P(X'|X)."""
    matrices = {}
    for attr in data.useful + data.hidden + data.private:
        k = data.classes(attr)
        bank_onehot = np.eye(k, dtype=np.float32)[data.labels(attr)[data.bank_rows]]
        per_sample = test_probs @ bank_onehot                       # P(class of x' = j | x)
        true = data.labels(attr)[data.test_rows]
        sums = np.zeros((k, k))
        np.add.at(sums, true, per_sample)
        counts = np.bincount(true, minlength=k)[:, None]
        matrices[attr] = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return matrices


def plot_confusion(matrices: dict, roles: dict, names: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(matrices), figsize=(3.6 * len(matrices), 3.4), squeeze=False)
    for ax, (attr, matrix) in zip(axes[0], matrices.items()):
        image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"{attr} ({roles[attr]})", fontsize=9)
        ax.set_xlabel("substitute's class", fontsize=8)
        ax.set_ylabel("original class", fontsize=8)
        ticks = np.arange(len(matrix)) if len(matrix) <= 16 else []
        labels = [str(n) for n in names.get(attr, [])] if len(names.get(attr, [])) == len(matrix) else ticks
        ax.set_xticks(ticks, labels[:len(ticks)], fontsize=7, rotation=90)
        ax.set_yticks(ticks, labels[:len(ticks)], fontsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle("PASS substitution confusion on the test split (appendix F.2)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def evaluate_substitution(data: PassData, positions_fn, probs_fn, attacker_epochs: int = 20, seed: int = 0,
                          plot_dir=None) -> dict:
    """All figures for one substitution mechanism. ``positions_fn(rows)`` draws one bank position per
    dataset row; ``probs_fn(rows)`` returns P(X'|X) for those rows."""
    ref, raw_nets = reference(data, attacker_epochs, seed)
    bank_x = data.x[data.bank_rows]
    train_x = bank_x[torch.as_tensor(positions_fn(data.train_rows), dtype=torch.long)]
    test_x = bank_x[torch.as_tensor(positions_fn(data.test_rows), dtype=torch.long)]
    roles = {**{a: "useful" for a in data.useful}, **{a: "hidden" for a in data.hidden},
             **{a: "private" for a in data.private}}
    rows = {attr: attribute_scores(data, attr, role, ref[attr], raw_nets[attr], train_x, test_x,
                                   attacker_epochs, seed + 10 + i)
            for i, (attr, role) in enumerate(roles.items())}
    nags = {role: [rows[a]["nag"] for a in rows if rows[a]["role"] == role] for role in ("useful", "hidden", "private")}
    worst = [max(rows[a]["nag"], rows[a]["tree_nag"]) for a in data.private]
    metrics = {"mnag": mnag(nags["useful"], nags["hidden"], nags["private"]),
               "mnag_annotated": mnag(nags["useful"], [], nags["private"]),
               "mnag_worst_attacker": mnag(nags["useful"], nags["hidden"], worst),
               "n_attacker_train": int(len(data.train_rows)), "n_test": int(len(data.test_rows)),
               "bank_size": int(len(data.bank_rows)), "attributes": rows}
    first_private, first_useful = rows[data.private[0]], rows[data.useful[0]]
    # PR-GAN's key names for the first private / useful attribute, so one table script reads both
    metrics.update(probing_acc_private=first_private["acc"], tree_acc_private=first_private["tree_acc"],
                   probing_acc_useful=first_useful["acc"])
    for attr, row in rows.items():
        metrics.update({f"nag_{attr}": row["nag"], f"acc_{attr}": row["acc"]})
        if "tree_acc" in row:
            metrics.update({f"tree_acc_{attr}": row["tree_acc"], f"random_star_{attr}": row["random_star"]})
    result = {"reference": {"original_acc_useful": ref[data.useful[0]]["acc_no_suppr"],
                            "original_acc_private": ref[data.private[0]]["acc_no_suppr"],
                            **{k: first_private[k] for k in ("random_star", "random_theta_sampling",
                                                             "guess_from_useful", "majority_private")}},
              "metrics": metrics}
    test_probs = probs_fn(data.test_rows)
    matrices = confusion_matrices(data, test_probs)
    metrics["confusion"] = {attr: m.round(4).tolist() for attr, m in matrices.items()}
    if plot_dir is not None:
        result["confusion_plot"] = str(plot_confusion(matrices, roles, data.dataset.class_names,
                                                    Path(plot_dir) / CONFUSION_PLOT))
    return result


def in_batches(fn, rows: np.ndarray) -> np.ndarray:
    return np.concatenate([fn(rows[i:i + BATCH]) for i in range(0, len(rows), BATCH)])


def evaluate_model(data: PassData, head, attacker_epochs: int = 20, seed: int = 0, plot_dir=None) -> dict:
    """Score the torch export head; substitutes drawn by the runtime's sampler (seeded: evaluation)."""
    rng = np.random.default_rng([seed, 13])

    def probs_fn(rows):
        return in_batches(lambda r: data.conditioned(probabilities(head, data.x[r]), r), rows)

    def positions_fn(rows):
        return in_batches(lambda r: draw_indices(probs_fn(r), rng), rows)
    return evaluate_substitution(data, positions_fn, probs_fn, attacker_epochs, seed, plot_dir)


def run_data(run_dir, run: dict, bank_rows=None) -> PassData:
    return prepare_data(load_run_dataset(run), run["useful"], run["private"], run.get("hidden"),
                        run["substitution"]["bank_size"], run["config"]["seed"],
                        bank_rows=load_bank_rows(run_dir, run) if bank_rows is None else bank_rows,
                        condition=run["substitution"].get("condition"))


def evaluate_pass_run(run_dir, run: dict, attacker_epochs: int = 20, plot_dir=None) -> dict:
    data = run_data(run_dir, run)
    return _flat(evaluate_model(data, load_head(run_dir, run), attacker_epochs, run["config"]["seed"], plot_dir))


def evaluate_pass_bundle(bundle_dir, backend: str, run_dir, run: dict, attacker_epochs: int = 20,
                         plot_dir=None) -> dict:
    """The probing attack on what the device emits: every substitute drawn by the runtime (index mode,
    OS entropy), mapped to the bank the bundle carries."""
    from sensorveil.runtime import Privatizer
    privatizer = Privatizer.load(bundle_dir, backend=backend, output="index")
    draw = privatizer.stages[-1]
    data = run_data(run_dir, run, bank_rows=draw.bank_indices)
    sensor_x = data.dataset.x

    def probs_fn(rows):
        return in_batches(lambda r: draw.conditioned(draw.probabilities(privatizer.run_model(data.x[r].numpy())),
                                                     data.known(r)), rows)

    def positions_fn(rows):
        return in_batches(lambda r: privatizer(sensor_x[r], known=data.known(r)).astype(np.int64), rows)
    result = evaluate_substitution(data, positions_fn, probs_fn, attacker_epochs, run["config"]["seed"], plot_dir)
    return {"backend": privatizer.backend_name, **_flat(result)}


def _flat(result: dict) -> dict:
    return {**result["reference"], **result["metrics"],
            **({"confusion_plot": result["confusion_plot"]} if "confusion_plot" in result else {})}


def exact_posterior_attacker(data: PassData, private: str, train_probs: np.ndarray, test_positions: np.ndarray):
    """The Bayes attacker of a substitution mechanism: it knows P(X'|X) on the training split and the
    private labels there, so q(s | bank position i) is proportional to the sum over training rows of
    class s of P(X' = i | x); it predicts argmax_s q(s | i) for each released test position. Nothing
    an attacker could learn from the bank index alone beats it."""
    labels = data.labels(private)
    classes = data.classes(private)
    mass = np.zeros((train_probs.shape[1], classes))
    for s in range(classes):
        mass[:, s] = train_probs[labels[data.train_rows] == s].sum(axis=0)
    guesses = mass.argmax(axis=1)[test_positions]
    return lambda seed: guesses      # deterministic given the release


def pass_release(data: PassData, train_probs: np.ndarray, train_positions: np.ndarray,
                 test_positions: np.ndarray) -> Release:
    bank_x = data.x[data.bank_rows]
    private = data.private[0]
    return Release(task=attack_task(data, private),
                   train=bank_x[torch.as_tensor(train_positions, dtype=torch.long)],
                   test=bank_x[torch.as_tensor(test_positions, dtype=torch.long)],
                   extra_attackers={"exact posterior (bank index)":
                                    exact_posterior_attacker(data, private, train_probs, test_positions)})


# -- the registered mechanism ----------------------------------------------------------------------
class PASSMechanism(Mechanism):
    """PASS: x is replaced by a substitute drawn from a bank with P(X'|X) of eq. 2."""

    name = MECHANISM
    kind = "substitution"
    summary = "PASS stochastic substitution from a bank (PASS eq. 2-8), any number of attributes"
    config_class = PASSConfig
    multi_attribute = True

    def make_config(self, request: TrainRequest) -> PASSConfig:
        config = super().make_config(request)
        config.epochs = request.epochs or config.epochs
        return config

    def train(self, request: TrainRequest) -> dict:
        config = self.make_config(request)
        base = {**request.base, "useful": request.useful, "private": request.private, "seed": config.seed}
        return train_pass_run(base, request.data, Path(request.out), config, hidden=request.hidden,
                              attacker_epochs=request.attacker_epochs)

    def evaluate_run(self, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        return evaluate_pass_run(run_dir, run, attacker_epochs)

    def evaluate_bundle(self, bundle_dir, backend: str, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        return evaluate_pass_bundle(bundle_dir, backend, run_dir, run, attacker_epochs)

    audit_load_options = {"output": "index"}

    def release(self, run_dir, run: dict, privatizer=None) -> Release:
        """Substitutes drawn by the trained head (seeded), or by the bundle on the device (OS entropy)."""
        if privatizer is None:
            data, head = run_data(run_dir, run), load_head(run_dir, run)
            rng = np.random.default_rng([run["config"]["seed"], 17])
            probs = lambda rows: in_batches(lambda r: data.conditioned(probabilities(head, data.x[r]), r),  # noqa: E731
                                            rows)
            draw = lambda rows: draw_indices(probs(rows), rng)                                 # noqa: E731
        else:
            stage = privatizer.stages[-1]
            data = run_data(run_dir, run, bank_rows=stage.bank_indices)
            probs = lambda rows: in_batches(  # noqa: E731
                lambda r: stage.conditioned(stage.probabilities(privatizer.run_model(data.x[r].numpy())),
                                            data.known(r)), rows)
            draw = lambda rows: in_batches(  # noqa: E731
                lambda r: privatizer(data.dataset.x[r], known=data.known(r)).astype(np.int64), rows)
        return pass_release(data, probs(data.train_rows), draw(data.train_rows), draw(data.test_rows))

    def graphs(self, run_dir, run: dict) -> dict:
        return {"model": Graph(load_head(run_dir, run))}

    def bundle(self, run_dir, run: dict, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        return write_bundle_files(run_dir, run, dataset, Path(out_dir), include_samples)


register(PASSMechanism())
