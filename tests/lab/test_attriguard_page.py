"""scripts/attriguard_results.py: the goal's parts ("met" only when every part holds), the page's shared-audit
table (raw-data row, intervals, the goal's parts, a finding made from the figures) and the paper's attackers'
table, on made-up figures; the audit cache that trains each raw-data attacker once per dataset."""
from __future__ import annotations

import time

import pytest

from tests.conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("attriguard_results")


def figure(mean: float, half: float = 0.02) -> dict:
    return {"mean": mean, "low": mean - half, "high": mean + half, "runs": [mean]}


def audited(strongest: float, useful: float, random_star: float = 0.6) -> dict:
    private = {"neural": figure(strongest - 0.05), "trees": figure(strongest - 0.02), "logistic": figure(0.55),
               "trees+useful": figure(strongest), "re-id": figure(strongest - 0.1)}
    return {"private": private, "strongest_attacker": "trees+useful", "strongest": private["trees+useful"],
            "utility": figure(useful), "random_star": random_star, "n_train": 1198, "n_test": 599}


def point(script, beta: float, strongest: float, useful: float, raw: dict) -> dict:
    paper = {"BA-A": 0.5, "LR-A": strongest - 0.1, "NN-A": strongest - 0.03}
    p = {**audited(strongest, useful), "beta": beta, "expected_l0": beta * 0.9,
         "paper_attackers": {"accuracy": paper, "strongest": max(paper.values())}}
    p["goal"] = script.goal(p, raw)
    return p


def made_up_results(script, raw_strongest: float = 0.97) -> dict:
    raw = {**audited(raw_strongest, 0.96), "has_power": raw_strongest > 0.65}
    sweep = [point(script, 0.0, 0.95, 0.96, raw), point(script, 4.0, 0.80, 0.93, raw),
             point(script, 8.0, 0.63, 0.93, raw)]       # within 5 points of Random*, utility kept
    data = {"dataset": "digits", "useful": "parity", "private": "lt5", "classes": 2, "n_train": 1198, "n_test": 599,
            "random_star": 0.6, "majority_private": 0.503, "raw": raw, "features": 64,
            "entries_to_change_guess": {"median": 1.0, "p90": 2.0, "unreachable_share": 0.0}, "sweep": sweep}
    return {"command": "python scripts/attriguard_results.py --datasets digits", "timestamp": "2026-01-01T00:00:00Z",
            "attacker_epochs": 5, "settings": {"seeds": 3, "attacker_epochs": 5, "betas": [0.0, 4.0, 8.0]},
            "goal": {"privacy_margin": 0.05, "utility_margin": 0.05}, "datasets": [data]}


def test_met_only_when_every_part_holds(script):
    raw = {**audited(0.97, 0.96), "has_power": True}
    assert script.goal(audited(0.64, 0.92), raw) == {"privacy": True, "utility": True, "power": True,
                                                       "verdict": "met"}
    assert script.goal(audited(0.66, 0.92), raw)["verdict"] == "not met"          # 6 points above Random*
    assert script.goal(audited(0.64, 0.90), raw)["verdict"] == "not met"          # utility 6 points under raw
    blind = {**raw, "has_power": False}                                            # raw rows would meet it too
    assert script.goal(audited(0.64, 0.92), blind)["verdict"] == "no power"


def test_the_page_has_the_audit_with_intervals_raw_rows_goal_parts_and_the_paper_table(script):
    page = script.markdown(made_up_results(script))
    assert "| raw data (no mechanism) | - | - | trees+useful: 97.0 [95.0, 99.0] |" in page
    assert "neural, trees, logistic, trees+useful" in page and "over 3 seeds" in page
    assert "| AttriGuard | 8 | 7.20 | trees+useful: 63.0 [61.0, 65.0] |" in page
    assert "| within | within | yes | met |" in page and "| NOT within | within | yes | not met |" in page
    assert "it is not the majority-class rate" in page and "*met* only when all three hold" in page
    assert "### The paper's attackers, one seed" in page and "| BA-A | LR-A | NN-A | strongest of the paper's |" in page
    assert "| 4 | 3.60 | 50.0% | 70.0% | 77.0% | 77.0% |" in page
    assert "AttriGuard protects here: the goal (privacy, utility, power) is met at beta 8." in page
    assert "a commit not recorded" in page                                         # no provenance: none invented


def test_the_finding_says_when_attriguard_does_not_protect_or_the_data_cannot_tell(script):
    leaky = made_up_results(script)
    for p in leaky["datasets"][0]["sweep"]:
        p["goal"] = {**p["goal"], "privacy": False, "verdict": "not met"}
    assert "AttriGuard does not protect here: at no beta run is the goal met." in script.markdown(leaky)
    blind = script.markdown(made_up_results(script, raw_strongest=0.62))
    assert "this data cannot show whether AttriGuard protects" in blind and "| no power |" in blind


def test_each_raw_data_attacker_trains_once_per_dataset(script):
    cache = script.RawAttackersOnce()
    cache.start(auditing_raw=True)                 # the raw audit: its release is the raw rows
    cache.put("trees", 0, "trees seed 0")
    cache.put("trees", 1, "trees seed 1")
    cache.put("neural", 0, "neural seed 0")
    assert cache.get("raw-data trees", 0) == "trees seed 0"
    assert cache.get("raw-data neural (and re-id)", 0) == ("neural seed 0", "neural seed 0")
    cache.start(auditing_raw=False)                # a beta's release: re-id meets that release, so it trains
    assert cache.get("raw-data trees", 0) == "trees seed 0"
    assert cache.get("raw-data neural (and re-id)", 0) is None
    assert cache.get("trees", 0) is None           # the release's own attackers always train
    cache.put("raw-data neural (and re-id)", 0, ("raw", "re-id"))
    assert cache.get("raw-data neural (and re-id)", 0) is None


def test_make_results_reads_the_shared_audit(script, monkeypatch):
    make_results = load_script("make_results")
    results = made_up_results(script)
    monkeypatch.setattr(make_results, "script_results", lambda name: results if name == "attriguard" else None)
    section = "\n".join(make_results.attriguard_section())
    assert "| digits | lt5 / parity | raw rows | - | 96.0 [94.0, 98.0] | trees+useful 97.0 [95.0, 99.0] |" in section
    assert "| digits | lt5 / parity | 8 | 7.20 | 93.0 [91.0, 95.0] | trees+useful 63.0 [61.0, 65.0] | 60.0 | met |" \
        in section


def test_a_silent_step_still_says_it_runs(script, monkeypatch):
    lines = []
    monkeypatch.setattr(script, "progress", lines.append)
    with script.heartbeat("training", every_s=0.05):
        time.sleep(0.3)
    assert len(lines) >= 2 and all(line.startswith("still training (") for line in lines)
