"""scripts/federated_protections.py: the goal's parts ("met" only when every part holds), and the page's table and
findings on made-up figures: (epsilon, delta) beside each DP row, the utility each protection costs against the
unprotected run, and a SecAgg+ run that moved the release as much as a noisy one is said to have."""
from __future__ import annotations

import pytest

from tests.conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("federated_protections")


def figure(mean: float, half: float = 0.02) -> dict:
    return {"mean": mean, "low": mean - half, "high": mean + half, "runs": [mean]}


def point(label: str, strongest: float, utility: float, dp=None, secagg=False, moved=0.0) -> dict:
    return {"protection": label, "strongest_attacker": "trees", "strongest": figure(strongest),
            "private": {"trees": figure(strongest)}, "utility": figure(utility), "random_star": 0.6,
            "differential_privacy": dp, "secure_aggregation": secagg, "largest_difference_from_none": moved}


def raw(strongest=0.99, utility=0.9) -> dict:
    return {**point("raw", strongest, utility), "power": {"raw_strongest_accuracy": strongest}}


def test_met_only_when_privacy_utility_and_power_all_hold(script):
    assert script.goal(point("x", 0.64, 0.86), raw())["verdict"] == "met"
    assert script.goal(point("x", 0.66, 0.86), raw())["verdict"] == "not met"       # 6 points above Random*
    assert script.goal(point("x", 0.64, 0.84), raw())["verdict"] == "not met"       # 6 points under raw utility
    assert script.goal(point("x", 0.64, 0.86), raw(strongest=0.64))["verdict"] == "no power"


def test_the_page_puts_epsilon_beside_each_dp_row_and_the_cost_against_none(script):
    dp = {"epsilon": 9.5, "delta": 1e-5, "rounds_released": 11}
    points = [point("none", 0.9, 0.8), point("SecAgg+", 0.9, 0.8, secagg=True, moved=1e-5),
              point("DP, noise 2", 0.7, 0.65, dp=dp, moved=0.3)]
    for p in points:
        p["goal"] = script.goal(p, raw())
    results = {"raw": raw(), "points": points}
    table = "\n".join(script.table(results))
    assert "| DP, noise 2 | 9.50 at delta 1e-05 (11 rounds) |" in table
    assert "-15.0 pts" in table and "| none | - |" in table
    said = "\n".join(script.findings(results))
    assert "at most 1e-05" in said and "Goal met by: none of the runs" in said
    assert "epsilon 9.50" in said


def test_a_pass_page_names_pass_and_counts_rows_drawn_otherwise(script):
    import numpy as np
    none_draws = np.arange(20, dtype=float).reshape(10, 2)
    secagg_draws = none_draws.copy()
    secagg_draws[3] += 1           # one row of ten drew another substitute
    assert script.MECHANISMS["pass-federated"]["difference"](secagg_draws, none_draws) == 0.1
    assert script.MECHANISMS["tappfl"]["difference"](secagg_draws, none_draws) == 1.0
    points = [point("none", 0.9, 0.8), point("SecAgg+", 0.9, 0.8, secagg=True, moved=0.1)]
    for p in points:
        p["goal"] = script.goal(p, raw())
    results = {"mechanism": "pass-federated", "raw": raw(), "points": points, "flower": "1.41.0",
               "settings": {"clients": 10, "rounds": 8, "local_epochs": 5, "clipping_norm": 1.0, "seeds": 3,
                            "attacker_epochs": 10},
               "provenance": {"command": "c", "date": "d", "host": "h", "commit": "0123456789", "dirty": False}}
    page = script.markdown(results)
    assert page.startswith("# What Flower's protections cost a federated release: SecAgg+ and client-side DP on PASS")
    assert "bank_source=server-split" in page and "pre-training" not in page
    assert "10.0% of its test rows draw another substitute" in page
