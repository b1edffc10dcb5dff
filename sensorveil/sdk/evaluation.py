"""Privacy evaluation: the paper's protocol (fixed D_y, D_z on privatized test data) and the
probing attack (a fresh attacker trained on privatized training data with the true labels,
scored on privatized test data). Privacy claims rest on the probing attack: a mechanism can
fool the fixed D_z it was trained against and still leak to an attacker that adapts to it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from sensorveil.sdk.datasets import stratified_slices
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.priors import empirical_guess_accuracy, prior_guess_accuracies
from sensorveil.sdk.training import accuracy, apply, predict, train_classifier

# model units in, model units out (a torch generator, a noise mechanism, or a deployed bundle)
Privatize = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Task:
    """What an evaluation needs: data in model units, labels and the split indices."""
    x: torch.Tensor
    useful: np.ndarray
    private: np.ndarray
    n_useful: int
    n_private: int
    med: np.ndarray
    attacker_train: np.ndarray      # indices the attacker learns from (privatized)
    test: np.ndarray                # indices everything is scored on (privatized)
    modality: str

    @property
    def model_shape(self) -> tuple:
        return tuple(self.x.shape[1:])


def make_slices(useful: np.ndarray, private: np.ndarray, n_private: int, seed: int) -> dict:
    """PR-GAN section 5.3: three slices equal in size and class mix (1: fixed classifiers, 2: the
    mechanism, of which a fifth is held out to choose its budget, 3: test). Every mechanism is
    scored on the same slice 3, and its probing attackers learn from slices 1 and 2."""
    strata = useful * n_private + private
    first, second, third = stratified_slices(strata, 3, seed)
    parts = stratified_slices(strata[second], 5, seed + 1)
    return {"classifiers": first, "generator_val": second[parts[0]],
            "generator_train": second[np.concatenate(parts[1:])], "test": third}


def pooled_features(x: np.ndarray) -> np.ndarray:
    """One row per sample; images above 4096 values (depth frames, person crops) pooled 4x4 over their
    last two axes so linear and tree attackers stay tractable on 2 cores."""
    flat = x.reshape(len(x), -1)
    if flat.shape[1] <= 4096:
        return flat
    if x.ndim >= 3:
        h, w = x.shape[-2] // 4 * 4, x.shape[-1] // 4 * 4
        pooled = x[..., :h, :w].reshape(x.shape[:-2] + (h // 4, 4, w // 4, 4)).mean((-3, -1))
        return pooled.reshape(len(x), -1)
    side = int(np.sqrt(flat.shape[1]))     # flattened square frames
    return x.reshape(len(x), side // 4, 4, side // 4, 4).mean((2, 4)).reshape(len(x), -1)


SPLIT_ATTRIBUTE = "trial_split"     # a dataset's own train (0) / test (1) split, if it has one


def dataset_slices(data, useful: str, private: str, seed: int) -> dict:
    """PR-GAN's slices for a dataset: :func:`make_slices`, or, when the dataset carries its own split
    (``trial_split``: walkway's time split, MotionSense's trials), slices 1 and 2 dealt from its
    training rows and slice 3 its test rows, so the mechanism is scored on the part it never saw."""
    y, z, n_z = data.attributes[useful], data.attributes[private], data.num_classes[private]
    if SPLIT_ATTRIBUTE not in data.attributes:
        return make_slices(y, z, n_z, seed)
    split = data.attributes[SPLIT_ATTRIBUTE]
    train, test = np.flatnonzero(split == 0), np.flatnonzero(split == 1)
    strata = (y * n_z + z)[train]
    first, second = (train[rows] for rows in stratified_slices(strata, 2, seed))
    parts = stratified_slices((y * n_z + z)[second], 5, seed + 1)
    return {"classifiers": first, "generator_val": second[parts[0]],
            "generator_train": second[np.concatenate(parts[1:])], "test": test}


def tree_attacker_accuracy(train_x: np.ndarray, train_z: np.ndarray, test_x: np.ndarray, test_z: np.ndarray,
                           seed: int) -> float:
    """A second attacker family: privacy must hold against attackers the defender did not train against."""
    return float((tree_attacker_predictions(train_x, train_z, test_x, seed) == test_z).mean())


def tree_attacker_predictions(train_x: np.ndarray, train_z: np.ndarray, test_x: np.ndarray, seed: int) -> np.ndarray:
    """The extra-trees attacker's guesses on ``test_x``, trained on pooled features of ``train_x``."""
    from sklearn.ensemble import ExtraTreesClassifier
    forest = ExtraTreesClassifier(n_estimators=200, n_jobs=-1, random_state=seed)
    forest.fit(pooled_features(train_x), train_z)
    return forest.predict(pooled_features(test_x))


def probing_attack(task: Task, train_x: torch.Tensor, test_x: torch.Tensor, labels: np.ndarray,
                   classes: int, epochs: int, seed: int, desc: str) -> float:
    attacker = make_classifier(task.modality, task.model_shape, classes)
    torch.manual_seed(seed)
    train_classifier(attacker, train_x, labels[task.attacker_train], epochs=epochs, desc=desc, seed=seed)
    return accuracy(attacker, test_x, labels[task.test])


def baselines(task: Task) -> dict:
    prior = prior_guess_accuracies(task.med, task.useful[task.test], task.private[task.test])
    prior["guess_from_useful"] = empirical_guess_accuracy(
        task.useful[task.attacker_train], task.private[task.attacker_train],
        task.useful[task.test], task.private[task.test], task.n_useful, task.n_private)
    prior["majority_private"] = float(np.bincount(task.private[task.test]).max() / len(task.test))
    return prior


def evaluate(task: Task, privatize: Privatize, fixed: dict | None = None, attacker_epochs: int = 20,
             tree_attacker: bool = True, seed: int = 0) -> dict:
    """All figures for one mechanism. ``fixed`` holds the defender's D_y and D_z (paper protocol)."""
    train_x = apply_privatize(privatize, task.x[task.attacker_train])
    test_x = apply_privatize(privatize, task.x[task.test])
    result = {"n_attacker_train": int(len(task.attacker_train)), "n_test": int(len(task.test))}
    if fixed:
        result["protocol_acc_useful"] = accuracy(fixed["D_y"], test_x, task.useful[task.test])
        result["protocol_acc_private"] = accuracy(fixed["D_z"], test_x, task.private[task.test])
    result["probing_acc_private"] = probing_attack(task, train_x, test_x, task.private, task.n_private,
                                                   attacker_epochs, seed, "probing attacker (private)")
    result["probing_acc_useful"] = probing_attack(task, train_x, test_x, task.useful, task.n_useful,
                                                  attacker_epochs, seed + 1, "utility probe (useful)")
    if tree_attacker:
        result["tree_acc_private"] = tree_attacker_accuracy(
            train_x.numpy(), task.private[task.attacker_train], test_x.numpy(), task.private[task.test], seed)
    result["distortion_l2"] = float((test_x - task.x[task.test]).flatten(1).norm(dim=1).mean())
    return result


def apply_privatize(privatize: Privatize, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([privatize(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])


def raw_reference(task: Task, fixed: dict) -> dict:
    """The 'Original Acc' rows of Table 2: the fixed classifiers on raw test data."""
    x = task.x[task.test]
    return {"original_acc_useful": accuracy(fixed["D_y"], x, task.useful[task.test]),
            "original_acc_private": accuracy(fixed["D_z"], x, task.private[task.test])}


__all__ = ["Task", "evaluate", "baselines", "raw_reference", "apply", "predict"]
