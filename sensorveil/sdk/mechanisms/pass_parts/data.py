"""PASS's data: the dataset in model units, the task's attributes, the train / test rows and the
substitute bank."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from sensorveil.runtime.stages.substitution import restrict_to_known
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import make_slices
from sensorveil.sdk.mechanisms.base import as_list
from sensorveil.sdk.training import to_model

SPLIT_ATTRIBUTE = "trial_split"          # a dataset's own train (0) / test (1) split, if it has one


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

    @property
    def bank_size(self) -> int:
        return int(len(self.bank_rows))

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


BANK_SPLIT = 2     # a dataset's rows of this split are its substitute bank's people, in neither train nor test


def bank_pool(dataset: SensorDataset, train: np.ndarray) -> np.ndarray:
    """The rows the substitute bank is drawn from: the dataset's own bank rows (``trial_split`` 2: people who
    are nobody's private rows, e.g. the camera's rendered walkers) when it has them, else the training split
    (section 5.1: sampled at random from the training data). Camera crops: only rows whose cut-out is one
    person (:func:`person_shaped_rows`), so a cut-out that is not person-shaped is never pasted."""
    split = dataset.attributes.get(SPLIT_ATTRIBUTE)
    declared = np.flatnonzero(split == BANK_SPLIT) if split is not None else np.zeros(0, np.int64)
    pool = declared if len(declared) else np.asarray(train)
    if dataset.foreground is None:
        return pool
    pool = pool[person_shaped_rows(dataset, pool)]
    if not len(pool):
        raise ValueError(f"no crop of {dataset.name!r} that could be a substitute has a person-shaped cut-out "
                         "(runtime camera.person_shaped); expected people walking alone in some crops")
    return pool


def bank_cut_outs(dataset: SensorDataset, rows: np.ndarray) -> np.ndarray:
    """Camera rows as the bank ships them: the person's pixels (at least 1), 0 elsewhere, reduced to the
    largest blob with small gaps closed (runtime camera.clean_cut_out)."""
    from sensorveil.runtime.camera import clean_cut_out
    samples = dataset.x[rows]
    raw = np.where(dataset.foreground[rows], np.maximum(samples, 1), 0).astype(np.uint8)
    return np.stack([clean_cut_out(c) for c in raw]).astype(samples.dtype).reshape(samples.shape)


def person_shaped_rows(dataset: SensorDataset, rows: np.ndarray) -> np.ndarray:
    """Per row, whether its cut-out is one person (runtime camera.person_shaped)."""
    from sensorveil.runtime.camera import person_shaped
    return np.asarray([person_shaped(c) for c in bank_cut_outs(dataset, rows)], dtype=bool).reshape(len(rows))


def prepare_data(dataset: SensorDataset, useful, private, hidden=None, substitutes: int = 4096,
                 seed: int = 0, bank_rows: np.ndarray | None = None, condition: str | None = None) -> PassData:
    """Splits and the substitute bank (section 5.1: sampled at random from the training split, or the
    dataset's own bank rows: :func:`bank_pool`)."""
    useful, private, hidden = as_list(useful), as_list(private), as_list(hidden)
    check_attributes(dataset, useful, private, hidden)
    if condition is not None and condition not in dataset.attributes:
        raise ValueError(f"condition {condition!r} is not an attribute of {dataset.name!r}; expected one of "
                         f"{sorted(dataset.attributes)}")
    if substitutes < 1:
        raise ValueError(f"--substitutes must be >= 1, got {substitutes}")
    train, test = split_rows(dataset, useful[0], private[0], seed)
    if bank_rows is None:
        pool = bank_pool(dataset, train)
        size = min(int(substitutes), len(pool))
        bank_rows = np.sort(np.random.default_rng([seed, 4096]).choice(pool, size=size, replace=False))
    return PassData(dataset=dataset, useful=useful, private=private, hidden=hidden, x=to_model(dataset),
                    train_rows=train, test_rows=test, bank_rows=np.asarray(bank_rows, dtype=np.int64),
                    condition=condition)


def joint_code(data: PassData, attributes: list) -> tuple[np.ndarray, int]:
    """All useful attributes as one label, for the best guess from what utility reveals."""
    code, size = np.zeros(len(data.dataset), dtype=np.int64), 1
    for attr in attributes:
        code, size = code * data.classes(attr) + data.labels(attr), size * data.classes(attr)
    return code, size
