"""The audit's arithmetic and its mechanism-specific attacker, on cases whose answers are known."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sensorveil.sdk.audit import interval


def test_interval_combines_seed_spread_and_test_sampling():
    figure = interval([0.70, 0.74], n_test=400)
    spread = np.var([0.70, 0.74], ddof=1) / 2
    half = 1.96 * math.sqrt(spread + 0.72 * 0.28 / 400)
    assert figure["mean"] == pytest.approx(0.72)
    assert (figure["low"], figure["high"]) == pytest.approx((0.72 - half, 0.72 + half))
    one = interval([0.5], n_test=100)                    # one seed: the binomial part alone
    assert one["high"] - one["mean"] == pytest.approx(1.96 * 0.05)
    assert interval([1.0, 1.0], 50)["high"] == 1.0       # clipped to [0, 1]


def test_exact_posterior_attacker_reads_the_private_class_off_the_bank_index():
    """A substitution that sends class-0 rows to substitute 0 and class-1 rows to substitute 1 reveals
    everything; one that sends everybody to the same mixture reveals only the majority class."""
    from types import SimpleNamespace

    from sensorveil.sdk.mechanisms.pass_substitution import exact_posterior_attacker
    labels = np.array([0, 1] * 50)
    data = SimpleNamespace(train_rows=np.arange(60), test_rows=np.arange(60, 100),
                           labels=lambda attr: labels, classes=lambda attr: 2)
    revealing = np.eye(2)[labels[:60]]
    assert exact_posterior_attacker(data, "s", revealing, labels[60:])(0) == 1.0
    uniform = np.full((60, 2), 0.5)
    draws = np.random.default_rng(0).integers(0, 2, 40)
    assert exact_posterior_attacker(data, "s", uniform, draws)(0) == pytest.approx(0.5)
