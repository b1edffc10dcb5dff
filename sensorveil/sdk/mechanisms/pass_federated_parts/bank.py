"""Where pass-federated's substitute bank comes from: a declared set that is no device's private rows.

PASS's section 5.1 samples D_substitute from the training data. Federated, that would make the server
hold (and the bundle ship) rows the devices were meant to keep, so the bank comes from one of two
sources, named at training and recorded in the run and the bundle's manifest:

* ``"declared"``: the dataset's own bank rows (``trial_split`` 2, pass_parts.data.bank_pool: people who are
  nobody's private rows, e.g. rendered walkers); every training row goes to a device.
* ``"server-split"``: a seeded share (``server_share``) of the training split that the server holds and
  no device is given, as a public or server-collected set would be; the devices are given the rest.

``"auto"`` takes the declared rows when the dataset has them, else a server split.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensorveil.sdk.mechanisms.pass_parts.data import BANK_SPLIT, SPLIT_ATTRIBUTE

BANK_SOURCES = ("auto", "declared", "server-split")


@dataclass
class BankPlan:
    """The bank's rows, the rows the devices are given, and the record of where the bank came from."""
    bank_rows: np.ndarray
    device_rows: np.ndarray
    origin: dict


def declared_rows(dataset) -> np.ndarray:
    split = dataset.attributes.get(SPLIT_ATTRIBUTE)
    return np.flatnonzero(split == BANK_SPLIT) if split is not None else np.zeros(0, np.int64)


def plan_bank(dataset, train_rows: np.ndarray, source: str, server_share: float, substitutes: int,
              seed: int) -> BankPlan:
    """The bank (up to ``substitutes`` rows, seeded) and the devices' rows for ``source``."""
    if source not in BANK_SOURCES:
        raise ValueError(f"bank_source={source!r}; expected one of {BANK_SOURCES}")
    declared = declared_rows(dataset)
    if source == "declared" and not len(declared):
        raise ValueError(f"bank_source=declared: dataset {dataset.name!r} declares no bank rows ({SPLIT_ATTRIBUTE} "
                         f"== {BANK_SPLIT}); expected bank_source=server-split")
    rng = np.random.default_rng([seed, 4096])
    if source != "server-split" and len(declared):
        pool, device_rows = declared, np.asarray(train_rows)
        origin = {"source": "declared", "pool_rows": int(len(pool)),
                  "statement": f"the dataset's declared bank rows ({SPLIT_ATTRIBUTE} == {BANK_SPLIT}), none of them "
                               "a device's row; the server holds them and every device receives the bank's labels"}
    else:
        if not 0.0 < server_share < 1.0:
            raise ValueError(f"server_share={server_share}: the server's share of the training split must lie in "
                             "(0, 1)")
        order = rng.permutation(np.asarray(train_rows))
        held = max(1, round(server_share * len(order)))
        pool, device_rows = np.sort(order[:held]), np.sort(order[held:])
        origin = {"source": "server-split", "share": float(server_share), "pool_rows": int(len(pool)),
                  "statement": "a seeded share of the training split held by the server and given to no device; "
                               "the server holds those rows and every device receives the bank's labels"}
    size = min(int(substitutes), len(pool))
    bank = np.sort(rng.choice(pool, size=size, replace=False))
    return BankPlan(bank_rows=bank.astype(np.int64), device_rows=device_rows.astype(np.int64),
                    origin={**origin, "bank_size": int(size)})
