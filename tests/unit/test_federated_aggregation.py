"""Aggregation that holds: FedTrimmedAvg refuses a trim fraction that trims nothing at the round's size
(naming the value, the round's client count and the least fraction that trims one), and the norm bound
follows the round's honest updates, so a client that scales its update to just under the bound, round
after round, does not take the global model over, where the old bound (100 times the model's norm) let it.
The rounds run in-process on numpy; each update is accepted or dropped by the server's own checks
(federated.validation) exactly as a Flower round applies them."""
from __future__ import annotations

import re

import numpy as np
import pytest

from sensorveil.sdk.federated.strategy import check_trim, least_trim_fraction
from sensorveil.sdk.federated.validation import UpdateLimits, median_bound_problems, move_problem
from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig, check_config


def test_a_trim_fraction_that_trims_nothing_is_refused_with_the_least_that_trims_one():
    pytest.importorskip("flwr")
    from flwr.serverapp.strategy.fedtrimmedavg import trim_mean
    # the audit's case: one client at 99 against three at 1; at beta 0.2 of 4 Flower trims nothing (a mean)
    updates = np.array([[99.0], [1.0], [1.0], [1.0]])
    assert float(trim_mean(updates, 0.2)[0]) == 25.5 and float(trim_mean(updates, 0.25)[0]) == 1.0
    message = ("trim_fraction=0.2 trims no update from a round of 4 clients (int(0.2 x 4) = 0, so fedtrimmedavg "
               "would be a plain mean); the least trim_fraction that trims one from each tail is 0.25 (1/4)")
    with pytest.raises(ValueError, match=re.escape(message)):
        check_config(PassFederatedConfig(aggregation="fedtrimmedavg", clients=4, trim_fraction=0.2))
    check_config(PassFederatedConfig(aggregation="fedtrimmedavg", clients=4, trim_fraction=0.25))
    check_config(PassFederatedConfig(aggregation="fedavg", clients=4, trim_fraction=0.2))   # unused there
    with pytest.raises(ValueError, match=r"round of 3 clients .* is 0\.3334 \(1/3\)"):
        check_trim(0.2, 3)
    with pytest.raises(ValueError, match="no trim_fraction below 0.5 trims one of 2; expected more clients or "
                                         "aggregation=fedmedian"):
        check_trim(0.4, 2)
    for clients in range(3, 200):    # the fraction the message names does trim one, with Flower's rounding
        least = least_trim_fraction(clients)
        assert least < 0.5 and int(least * clients) == 1, clients


def adaptive_federation(rule: str, clients: int, rounds: int = 30, multiple: float = 2.0, seed: int = 0):
    """FedAvg over ``clients`` - 1 honest devices (each steps half way to its own optimum, near 0) and one
    that pushes the model toward a target of its own, scaling its update to 0.99 of the bound it faces
    ("old": 100 times the global model's norm; "median": ``multiple`` times the round's median update,
    which it is assumed to know). Returns (start, final distance to the honest optimum, to the target)."""
    rng = np.random.default_rng(seed)
    honest_opt, target = np.zeros(64), np.full(64, 3.0)
    optima = [honest_opt + rng.normal(0.0, 0.05, 64) for _ in range(clients - 1)]
    w = rng.normal(0.0, 1.0, 64)
    start = float(np.linalg.norm(w - honest_opt))
    for _ in range(rounds):
        honest = [w + 0.5 * (opt - w) for opt in optima]
        moves = [float(np.linalg.norm(u - w)) for u in honest]
        push = (target - w) / np.linalg.norm(target - w)
        if rule == "old":
            size = 0.99 * 100 * max(float(np.linalg.norm(w)), 1.0)
            accepted = move_problem(size, {"w": w}, UpdateLimits(max_update_ratio=100.0)) is None
        else:   # the median of the round's updates, the attacker's the largest of them
            size = 0.99 * multiple * sorted(moves)[len(moves) // 2]
            problems = median_bound_problems(moves + [size], multiple)
            assert problems[:-1] == [None] * len(moves)    # no honest device dropped
            accepted = problems[-1] is None
        assert accepted, "the adaptive client stays just under the bound, so the server aggregates it"
        w = np.mean(honest + [w + size * push], axis=0)
    return start, float(np.linalg.norm(w - honest_opt)), float(np.linalg.norm(w - target))


@pytest.mark.parametrize("clients", [4, 5, 8])
def test_an_adaptive_client_just_under_the_median_bound_does_not_take_over(clients):
    start, to_honest, to_target = adaptive_federation("median", clients)
    span = float(np.linalg.norm(np.full(64, 3.0)))       # honest optimum to the attacker's target
    assert to_honest < 0.05 * span and to_honest < 0.1 * start and to_target > 0.95 * span


def test_under_the_old_bound_the_same_client_takes_the_model_over():
    _, to_honest, _ = adaptive_federation("old", 5)
    assert to_honest > 1e6       # 100 times the model's norm per round: the model runs off


def test_an_update_over_the_median_bound_is_dropped_and_says_why():
    problems = median_bound_problems([1.0, 1.1, 0.9, 2.5], 2.0)
    assert problems[:3] == [None, None, None]
    assert problems[3] == ("the update moves the model by 2.5, more than norm_multiple=2 times the round's median "
                           "update (1.05), 2.1")
    assert median_bound_problems([0.0, 0.0, 3.0], 2.0) == [None, None, None]    # a median of 0 bounds nothing
    with pytest.raises(ValueError, match="norm_multiple=0.5: expected a finite number >= 1"):
        UpdateLimits(norm_multiple=0.5)
