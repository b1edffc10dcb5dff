"""AttriGuard (Jia and Gong, USENIX Security 2018): evasion noise that steers a classifier's inference.

The defender learns LR-D, a multinomial logistic regression of the private attribute, on the
defender's slice (PR-GAN's slice 1, so every mechanism is scored on the same test slice). For each
sample the device finds r_i for every attribute value i (Phase I, PANDA) and the mechanism M* of
eq. 3 (Phase II, KKT conditions eq. 7-10), then releases x + r_i with i ~ M*. The numpy functions of
sensorveil.runtime.stages.attriguard do both, for training, evaluation and the device alike.

Evaluation: the project's probing attack (attackers trained on the released data) and the paper's
attacker suite (section 5.1.2): BA-A, LR-A, RF-A and NN-A trained on clean data, AT-A (adversarial
training on AttriGuard-noised data), DD-A (defensive distillation), RC-A (region-based voting, n = 100,
radius 0.05) and LRA-A (a low-rank NMF approximation removes the noise first).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sensorveil.runtime.stages.attriguard import (
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_TAU,
    POLICIES,
    AttriGuardEntry,
    attriguard,
)
from sensorveil.sdk.evaluation import Task, baselines, dataset_slices, probing_attack, tree_attacker_accuracy
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import BundleParts, Graph, Mechanism, TrainRequest, protocol_task
from sensorveil.sdk.rundir import RunRecord
from sensorveil.sdk.training import accuracy, train_classifier

ARRAYS = {"weights": "attriguard_weights.npy", "bias": "attriguard_bias.npy", "target": "attriguard_target.npy"}
TARGETS = ("p_r", "p_u")


@dataclass
class AttriGuardConfig:
    policy: str = "modify_add"       # section 5.1.3's default noise-type policy
    beta: float = 4.0                # expected L0 budget of eq. 3 (section 5.2: 3-4 modified entries)
    target: str = "p_r"              # p_r: shares of the training data; p_u: uniform (section 5.1.3)
    tau: float = DEFAULT_TAU         # PANDA's step (section 5.1.3)
    max_iterations: int = DEFAULT_MAX_ITERATIONS     # PANDA's maxiter
    regularization: float = 1.0      # LR-D's inverse L2 strength (scikit-learn's C)
    seed: int = 0                    # splits and the evaluation's draws; the device draws from OS entropy


class DefenderLR(nn.Module):
    """LR-D as the bundle's graph: the logits W x + b of the flattened sample (argmax = C(x))."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray):
        super().__init__()
        self.linear = nn.Linear(weights.shape[1], weights.shape[0])
        with torch.no_grad():
            self.linear.weight.copy_(torch.from_numpy(weights))
            self.linear.bias.copy_(torch.from_numpy(bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))


def fit_defender(x: np.ndarray, labels: np.ndarray, classes: int, config: AttriGuardConfig):
    """LR-D's weights (m, d) and bias (m,) over all m values; a value absent from the defender's rows
    gets a bias of -30 so C never infers it (and PANDA cannot reach it)."""
    from sklearn.linear_model import LogisticRegression
    model = LogisticRegression(C=config.regularization, max_iter=1000)
    model.fit(x, labels)
    coef, intercept = model.coef_, model.intercept_
    if len(model.classes_) == 2:     # scikit-learn keeps one row for two classes: softmax([-z/2, z/2])
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    weights = np.zeros((classes, x.shape[1]), np.float32)
    bias = np.full(classes, -30.0, np.float32)
    weights[model.classes_], bias[model.classes_] = coef, intercept
    return weights, bias


def target_distribution(labels: np.ndarray, classes: int, kind: str) -> np.ndarray:
    if kind not in TARGETS:
        raise ValueError(f"unknown target distribution {kind!r}; expected one of {TARGETS}")
    if kind == "p_u":
        return np.full(classes, 1.0 / classes)
    counts = np.bincount(labels, minlength=classes).astype(np.float64)
    return counts / counts.sum()


def numpy_decide(weights: np.ndarray, bias: np.ndarray):
    return lambda flat: (flat @ weights.T + bias).argmax(axis=1)


def make_privatize(arrays: dict, config: AttriGuardConfig, seed: int | None = None):
    """The mechanism in model units for torch callers, with the stage's own numpy functions."""
    rng = np.random.default_rng(seed)
    decide = numpy_decide(arrays["weights"], arrays["bias"])

    def privatize(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(len(x), -1).numpy()
        out = attriguard(flat, decide, arrays["weights"], arrays["bias"], arrays["target"], config.beta,
                         config.policy, config.tau, config.max_iterations, rng)
        return torch.from_numpy(out.reshape(x.shape))
    return privatize


# -- the paper's attacker suite (section 5.1.2) ---------------------------------------------------------
def mlp(dim: int, classes: int) -> nn.Module:
    """NN-A: a three-layer network (input, one ReLU hidden layer, softmax output); 512 hidden units
    where the paper used 30,000 for 10,000 apps."""
    return nn.Sequential(nn.Flatten(), nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, classes))


def train_mlp(x: np.ndarray, labels: np.ndarray, classes: int, epochs: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return train_classifier(mlp(x.shape[1], classes), torch.from_numpy(x), labels, epochs=epochs,
                            desc="attacker NN-A", seed=seed)


def nn_accuracy(net: nn.Module, x: np.ndarray, labels: np.ndarray) -> float:
    return accuracy(net, torch.from_numpy(x), labels)


def distilled(x: np.ndarray, labels: np.ndarray, classes: int, epochs: int, seed: int, temperature: float = 20.0):
    """DD-A: a teacher trained with logits / T, a student trained on the teacher's soft labels at T."""
    teacher = train_mlp(x, labels, classes, epochs, seed)
    with torch.no_grad():
        soft = torch.softmax(teacher(torch.from_numpy(x)) / temperature, dim=1)
    torch.manual_seed(seed + 1)
    student = mlp(x.shape[1], classes)
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    inputs = torch.from_numpy(x)
    for _ in range(epochs):
        for start in range(0, len(x), 64):
            log_q = torch.log_softmax(student(inputs[start:start + 64]) / temperature, dim=1)
            loss = -(soft[start:start + 64] * log_q).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return student.eval()


def region_vote(net: nn.Module, x: np.ndarray, classes: int, seed: int, n: int = 100, radius: float = 0.05):
    """RC-A: the majority inference over n points drawn from the hypercube of the given radius around x."""
    rng = np.random.default_rng(seed)
    votes = np.zeros((len(x), classes), np.int64)
    with torch.no_grad():
        for _ in range(n):
            jittered = np.clip(x + rng.uniform(-radius, radius, x.shape), 0, 1).astype(np.float32)
            votes[np.arange(len(x)), net(torch.from_numpy(jittered)).argmax(1).numpy()] += 1
    return votes.argmax(axis=1)


def low_rank(train: np.ndarray, test: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """LRA-A's de-noising: a non-negative low-rank approximation of the stacked user matrix."""
    from sklearn.decomposition import NMF
    rank = max(2, min(50, train.shape[1] // 4))
    stacked = np.vstack([train, test])
    model = NMF(n_components=rank, init="nndsvda", max_iter=300, random_state=seed)
    approx = (model.fit_transform(stacked) @ model.components_).astype(np.float32)
    return approx[:len(train)], approx[len(train):]


def attacker_suite(clean_train: np.ndarray, noised_train: np.ndarray, noised_test: np.ndarray,
                   train_labels: np.ndarray, test_labels: np.ndarray, classes: int, epochs: int, seed: int) -> dict:
    """Inference accuracy of each of the paper's attacks on the noised test split."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    majority = np.bincount(train_labels, minlength=classes).argmax()
    nn_a = train_mlp(clean_train, train_labels, classes, epochs, seed)
    lr_a = LogisticRegression(max_iter=1000).fit(clean_train, train_labels)
    rf_a = RandomForestClassifier(n_estimators=100, n_jobs=-1, random_state=seed).fit(clean_train, train_labels)
    denoised_train, denoised_test = low_rank(clean_train, noised_test, seed)
    return {"BA-A": float((test_labels == majority).mean()),
            "LR-A": float((lr_a.predict(noised_test) == test_labels).mean()),
            "RF-A": float((rf_a.predict(noised_test) == test_labels).mean()),
            "NN-A": nn_accuracy(nn_a, noised_test, test_labels),
            "AT-A": nn_accuracy(train_mlp(noised_train, train_labels, classes, epochs, seed + 1), noised_test,
                                test_labels),
            "DD-A": nn_accuracy(distilled(clean_train, train_labels, classes, epochs, seed + 2), noised_test,
                                test_labels),
            "RC-A": float((region_vote(nn_a, noised_test, classes, seed) == test_labels).mean()),
            "LRA-A": nn_accuracy(train_mlp(denoised_train, train_labels, classes, epochs, seed + 3), denoised_test,
                                 test_labels)}


# -- the registered mechanism --------------------------------------------------------------------------
class AttriGuardMechanism(Mechanism):
    name = "attriguard"
    kind = "noise"
    summary = "AttriGuard evasion noise: PANDA (Algorithm 1) + the KKT mechanism of eq. 3 (eq. 7-10)"
    config_class = AttriGuardConfig

    def make_config(self, request: TrainRequest) -> AttriGuardConfig:
        config = super().make_config(request)
        if config.policy not in POLICIES or config.target not in TARGETS:
            raise ValueError(f"attriguard: policy must be one of {POLICIES} and target one of {TARGETS}; "
                             f"got {config.policy!r}, {config.target!r}")
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = self.only_one(request.useful, "useful"), self.only_one(request.private, "private")
        config = self.make_config(request)
        data = request.data
        task = protocol_task(data, useful, private, config.seed)
        flat = task.x.reshape(len(task.x), -1).numpy()
        # the dataset's own split when it has one (a shipped test split never trains the defender)
        defender_rows = dataset_slices(data, useful, private, config.seed)["classifiers"]
        weights, bias = fit_defender(flat[defender_rows], task.private[defender_rows], task.n_private, config)
        arrays = {"weights": weights, "bias": bias,
                  "target": target_distribution(task.private[task.attacker_train], task.n_private, config.target)}
        for key, name in ARRAYS.items():
            np.save(Path(request.out) / name, arrays[key], allow_pickle=False)
        privatize = make_privatize(arrays, config, seed=config.seed)
        noised_train = privatize(task.x[task.attacker_train])
        noised_test = privatize(task.x[task.test])
        decide = numpy_decide(weights, bias)
        reference = {**baselines(task), "defender_acc_raw": float(
            (decide(flat[task.test]) == task.private[task.test]).mean())}
        metrics = released_figures(task, noised_train, noised_test, request.attacker_epochs, config.seed)
        metrics["defender_acc_private"] = float(
            (decide(noised_test.reshape(len(noised_test), -1).numpy()) == task.private[task.test]).mean())
        metrics["attackers"] = attacker_suite(
            flat[task.attacker_train], noised_train.reshape(len(noised_train), -1).numpy(),
            noised_test.reshape(len(noised_test), -1).numpy(), task.private[task.attacker_train],
            task.private[task.test], task.n_private, request.attacker_epochs, config.seed)
        return {**request.base, "useful": useful, "private": private, "seed": config.seed, "kind": self.kind,
                "config": asdict(config), "reference": reference, "metrics": metrics}

    def load_arrays(self, run_dir) -> dict:
        return {key: np.load(Path(run_dir) / name, allow_pickle=False) for key, name in ARRAYS.items()}

    def privatize(self, run_dir, run: RunRecord):
        return make_privatize(self.load_arrays(run_dir), self.config_of(run), seed=run.seed)

    def graphs(self, run_dir, run: RunRecord) -> dict:
        arrays = self.load_arrays(run_dir)
        return {"defender": Graph(DefenderLR(arrays["weights"], arrays["bias"]).eval())}

    def bundle(self, run_dir, run: RunRecord, dataset, out_dir: Path, include_samples: bool = True):
        config = self.config_of(run)
        for key, array in self.load_arrays(run_dir).items():
            np.save(Path(out_dir) / ARRAYS[key], array, allow_pickle=False)
        entry = {"name": self.name, "kind": self.kind, "useful": run.useful, "private": run.private,
                 "parameters": asdict(config)}
        stage = AttriGuardEntry("defender", ARRAYS, config.beta, config.policy, config.tau, config.max_iterations)
        return BundleParts(entry, [stage.to_manifest()])


def released_figures(task: Task, train_x: torch.Tensor, test_x: torch.Tensor, epochs: int, seed: int) -> dict:
    """The project's standard figures on already privatized splits (what sensorveil.sdk.evaluation
    computes from a privatize function), so the expensive Phase I runs once."""
    return {"n_attacker_train": int(len(task.attacker_train)), "n_test": int(len(task.test)),
            "probing_acc_private": probing_attack(task, train_x, test_x, task.private, task.n_private, epochs, seed,
                                                  "probing attacker (private)"),
            "probing_acc_useful": probing_attack(task, train_x, test_x, task.useful, task.n_useful, epochs, seed + 1,
                                                 "utility probe (useful)"),
            "tree_acc_private": tree_attacker_accuracy(train_x.numpy(), task.private[task.attacker_train],
                                                       test_x.numpy(), task.private[task.test], seed),
            "distortion_l2": float((test_x - task.x[task.test]).flatten(1).norm(dim=1).mean()),
            "expected_l0": float((test_x != task.x[task.test]).flatten(1).sum(1).float().mean())}


register(AttriGuardMechanism())
