"""scripts/tappfl_results.py: the goal's parts ("met" only when every part holds), where the paper's measure sits
at chance, the page's naming (both privacy terms with their equations, Random* for what it is, the raw-data row,
the audit's families over seeds) on made-up figures; and a tiny run (two devices, one round) that writes the JSON
and the page the pages beside it read, and renders the same page again from the JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "tappfl_results.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "lab"), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def script():
    return load_script("tappfl_results")


def test_the_raw_rows_attackers_train_once_and_never_stand_in_for_a_release(script):
    """The raw audit's family X at seed 0 is its power attacker "raw-data X"; a representation's audit reads that
    back, and never its own seed-0 attacker on r (the old cache handed r's guesses out as the raw rows')."""
    from sensorveil.sdk.audit import Release
    raw_rows, task = script.RawRowsOnce(), object()
    raw_rows.start(Release(task, None, None))
    raw_rows.put("trees", 0, "trees on raw rows")
    assert raw_rows.get("raw-data trees", 0) == "trees on raw rows"
    assert raw_rows.get("raw-data neural (and re-id)", 0) is None              # not trained yet: train it
    raw_rows.put("raw-data neural (and re-id)", 0, ("neural on raw rows", "the same rows"))
    raw_rows.start(Release(task, None, None, raw_task=task))                   # a representation's audit
    raw_rows.put("trees", 0, "trees on r")
    assert raw_rows.get("raw-data trees", 0) == "trees on raw rows"
    assert raw_rows.get("raw-data neural", 0) == "neural on raw rows"
    assert raw_rows.get("raw-data neural (and re-id)", 0) is None              # re-id meets its own release
    assert raw_rows.get("trees", 1) is None


def figure(mean: float, half: float = 0.02) -> dict:
    return {"mean": mean, "low": mean - half, "high": mean + half, "runs": [mean]}


def audited(strongest: float, useful: float, random_star: float = 0.6) -> dict:
    private = {"neural": figure(strongest - 0.05), "trees": figure(strongest - 0.02), "logistic": figure(0.55),
               "trees+useful": figure(strongest)}
    return {"private": private, "strongest_attacker": "trees+useful", "strongest": private["trees+useful"],
            "utility": figure(useful), "random_star": random_star, "n_train": 1198, "n_test": 599}


def point(script, lam: float, term: str, strongest: float, useful: float, paper: float, raw: dict) -> dict:
    p = {**audited(strongest, useful), "lam": lam, "term": term, "run": f"runs/{lam}-{term}", "bundle": "b",
         "wall_seconds": 10.0, "devices": {"ce": 0.69, "ce_over_ln_k": 0.995, "jsd": -0.4, "vclub": 0.0,
                                           "updates_per_round": 2.0, "dropped": 0}}
    p["paper"] = {"accuracy": figure(paper, 0.06), "devices": 4, "heldout_rows": 240, "chance": 0.5,
                  "at_chance": paper - 0.06 <= 0.5}
    p["goal"] = script.goal(p, raw)
    return p


def made_up_results(script) -> dict:
    raw = {**audited(0.99, 0.86), "has_power": True}
    both = point(script, 0.0, "both", 0.95, 0.86, 0.88, raw)
    vclub = point(script, 1.0, "vclub", 0.63, 0.84, 0.51, raw)       # within 5 points of Random*, utility kept
    ce = point(script, 1.0, "ce", 0.70, 0.84, 0.50, raw)
    data = {"dataset": "digits", "useful": "parity", "private": "lt5", "clients": 4, "fraction": 0.5,
            "participation": "sampled", "reference": {"random_guess_private": 0.5, "n_private": 2, "random_star": 0.6},
            "raw": raw, "terms": {"vclub": [both, vclub], "ce": [both, ce]}, "points": [both, vclub],
            "partition": {"rows_median": 299.5, "heldout": {"rows": 240}}}
    settings = {"rounds": 20, "pretrain_rounds": 5, "local_epochs": 10, "participation": "sampled", "seeds": 3,
                "attacker_epochs": 10, "lambdas": [0.0, 1.0], "privacy_terms": ["vclub", "ce"], "evaluate_every": 20}
    return {"command": "python scripts/tappfl_results.py --datasets digits", "timestamp": "2026-01-01 00:00 UTC",
            "flower": "1.41.0", "settings": settings, "datasets": [data]}


def test_met_only_when_every_part_holds(script):
    raw = {**audited(0.99, 0.86), "has_power": True}
    assert script.goal(audited(0.64, 0.84), raw) == {"privacy": True, "utility": True, "power": True,
                                                       "verdict": "met"}
    assert script.goal(audited(0.66, 0.84), raw)["verdict"] == "not met"          # 6 points above Random*
    assert script.goal(audited(0.64, 0.80), raw)["verdict"] == "not met"          # utility 6 points under raw
    blind = {**raw, "has_power": False}                                            # raw data would meet it too
    assert script.goal(audited(0.64, 0.84), blind)["verdict"] == "no power"


def test_the_paper_measure_is_at_chance_when_its_interval_reaches_one_over_k(script):
    def run(accuracy: float) -> dict:
        return {"metrics": {"paper_inference_accuracy": accuracy, "paper_inference_devices": 100},
                "config": {"clients": 100}}
    at = script.paper_measure(run(0.0082), heldout_rows=2806, n_private=104)       # UJIIndoorLoc's region
    assert at["at_chance"] and at["heldout_rows"] == 2806 and at["chance"] == pytest.approx(1 / 104)
    above = script.paper_measure(run(0.88), heldout_rows=240, n_private=2)
    assert not above["at_chance"] and above["accuracy"]["low"] > 0.5
    assert script.paper_measure({"metrics": {}, "config": {}}, 10, 2) == {"accuracy": None}


def test_the_page_names_terms_random_star_raw_rows_and_chance(script):
    page = script.markdown(made_up_results(script))
    assert "*vCLUB, eq. 2*" in page and "*CE, eq. 4/7*" in page and "| vCLUB, eq. 2 | 1 |" in page
    assert "| CE, eq. 4/7 | 1 |" in page and "| both | 0 |" in page
    assert "it is not the majority-class rate" in page and "best guess of the private attribute from the useful" in page
    assert "| raw data (no mechanism) |" in page and "neural, trees, logistic, trees+useful" in page
    assert "over 3 seeds" in page and "63.0 [61.0, 65.0]" in page                  # the audit's interval
    assert "| met |" in page and "| not met |" in page
    assert "**Where the paper's measure sits at chance**:" in page and "lambda 1 (CE, eq. 4/7)" in page
    assert "too few for 100 devices" in page                                       # digits' device count said
    assert "the goal is met at lambda 1 (vclub)" in page
    assert "a commit not recorded" in page                                         # no provenance: none invented


@pytest.mark.pages
@pytest.mark.trains
@pytest.mark.boots
@pytest.mark.exports
def test_a_tiny_run_writes_the_json_and_the_page(tmp_path):
    docs = tmp_path / "docs"
    command = [sys.executable, str(SCRIPT), "--datasets", "digits", "--clients", "2", "--rounds", "2",
               "--pretrain-rounds", "1", "--local-epochs", "1", "--attacker-epochs", "1", "--seeds", "2",
               "--lambdas", "1", "--out", str(tmp_path / "runs"), "--docs", str(docs), "--allow-dirty"]
    subprocess.run(command, cwd=REPO, env=ENV, check=True, timeout=900)
    results = json.loads((docs / "tappfl_results.json").read_text())
    data = results["datasets"][0]
    assert data["clients"] == 2 and set(data["terms"]) == {"vclub", "ce"}
    for term, points in data["terms"].items():
        (p,) = points
        assert p["term"] == term and p["lam"] == 1.0 and set(p["private"]) == {"neural", "trees", "logistic",
                                                                               "trees+useful"}
        assert len(p["private"]["trees"]["runs"]) == 2 and p["goal"]["verdict"] in ("met", "not met", "no power")
        assert p["paper"]["devices"] == 2 and p["devices"]["updates_per_round"] == 1.0
        run = json.loads((tmp_path / "runs" / f"digits-lam1-{term}" / "run.json").read_text())
        rounds = [entry for entry in run["federation"]["rounds"] if entry["phase"] == "tappfl"]
        assert "probing_acc_private" not in run["metrics"]          # release_attacks off: the audit attacks it
        assert ["evaluate" in entry for entry in rounds] == [False, True]     # the devices evaluated once, at the end
    # what make_results.py and pass_federated_results.py read
    deployed = data["points"][0]["deployed"]
    assert {"probing_acc_private", "tree_acc_private", "probing_acc_useful", "worst_gap_private",
            "random_star"} <= set(deployed) and "random_star" in data["reference"]
    page = (docs / "tappfl_results.md").read_text()
    assert "| raw data (no mechanism) |" in page and "| vCLUB, eq. 2 | 1 |" in page
    assert (docs / "tappfl_results.png").is_file() and (docs / "tappfl_tsne.png").is_file()
    (docs / "tappfl_results.md").unlink()
    subprocess.run([sys.executable, str(SCRIPT), "--render-only", "--docs", str(docs)], cwd=REPO, env=ENV, check=True,
                   timeout=120)
    assert (docs / "tappfl_results.md").read_text() == page
