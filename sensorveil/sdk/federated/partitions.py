"""The rows each simulated device holds, IID or non-IID (Dirichlet over one attribute, Hsu et al. 2019):
for every class k the shares of the M devices are drawn from Dir(alpha), so a small alpha gives each
device few classes and a large alpha tends to IID; or one device per value of an attribute (a user, a
phone), the split the data itself has."""
from __future__ import annotations

from typing import Callable

import numpy as np


def partition_rows(rows: np.ndarray, labels: np.ndarray, num_clients: int, scheme: str = "iid",
                   alpha: float = 0.5, seed: int = 0, min_size: int = 2) -> list[np.ndarray]:
    """The rows of each of ``num_clients`` devices. ``labels[i]`` is the class of ``rows[i]`` (the
    attribute a Dirichlet partition skews). Deterministic in ``seed``, so every Flower node computes
    the same partition and takes its own part."""
    rows, labels = np.asarray(rows), np.asarray(labels)
    if num_clients < 1 or len(rows) < num_clients * min_size:
        raise ValueError(f"{len(rows)} rows cannot give {num_clients} devices {min_size}+ rows each; "
                         "expected fewer devices or more data")
    rng = np.random.default_rng([seed, 1010])
    if scheme == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(rows), num_clients)]
    if scheme == "dirichlet":
        if alpha <= 0:
            raise ValueError(f"the Dirichlet concentration alpha must be > 0, got {alpha}")
        return dirichlet_partition(rows, labels, num_clients, alpha, rng, min_size)
    if scheme == "groups":
        return group_partition(rows, labels, num_clients, min_size)
    raise ValueError(f"unknown partition {scheme!r}; expected 'iid', 'dirichlet' or 'groups'")


def group_partition(rows, labels, num_clients: int, min_size: int) -> list[np.ndarray]:
    """One device per value of ``labels`` (a user, a phone): the split the data itself has, so each device
    holds one person's or one phone's rows, as a deployment would."""
    groups = np.unique(labels)
    if len(groups) != num_clients:
        raise ValueError(f"the 'groups' partition gives one device per value: these rows hold {len(groups)} values, "
                         f"so expected clients={len(groups)}, got {num_clients}")
    parts = [np.sort(rows[labels == group]) for group in groups]
    small = [int(group) for group, part in zip(groups, parts) if len(part) < min_size]
    if small:
        raise ValueError(f"the 'groups' partition's values {small} hold fewer than {min_size} rows each; expected "
                         "every device to hold a few rows (use another attribute or the iid partition)")
    return parts


def dirichlet_partition(rows, labels, num_clients: int, alpha: float, rng, min_size: int,
                        attempts: int = 200) -> list[np.ndarray]:
    """Per class, split its rows among the devices in Dir(alpha) proportions; draw again (up to
    ``attempts`` times) until every device holds ``min_size`` rows, as Hsu et al. do."""
    for _ in range(attempts):
        parts = [[] for _ in range(num_clients)]
        for k in np.unique(labels):
            members = rng.permutation(rows[labels == k])
            cuts = (np.cumsum(rng.dirichlet(np.full(num_clients, alpha)))[:-1] * len(members)).astype(int)
            for part, chunk in zip(parts, np.split(members, cuts)):
                part.append(chunk)
        parts = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"no Dirichlet(alpha={alpha}) partition of {len(rows)} rows gives all {num_clients} devices "
                     f"{min_size}+ rows in {attempts} draws; expected a larger alpha or fewer devices")


def partition_summary(parts: list[np.ndarray], labels_of_rows: Callable[[np.ndarray], np.ndarray]) -> dict:
    """Sizes and class counts per device, for the run record."""
    sizes = [len(p) for p in parts]
    classes = [int(len(np.unique(labels_of_rows(p)))) for p in parts]
    return {"devices": len(parts), "rows_min": int(min(sizes)), "rows_median": float(np.median(sizes)),
            "rows_max": int(max(sizes)), "classes_per_device_mean": float(np.mean(classes))}
