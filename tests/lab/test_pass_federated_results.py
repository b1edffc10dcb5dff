"""scripts/pass_federated_results.py: a --quick run on digits writes the JSON and the page with
the federation's settings, the bundle audit, the goal and central PASS / TAPPFL beside it; and the arithmetic it
adds (mNAG from the audit, the goal's verdict) against a computation written out here."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "pass_federated_results.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def script():
    return load_script("pass_federated_results")   # what it shares with pass_results.py it imports from sensorveil_lab


def audit(strongest: float, random_star: float, useful: float) -> dict:
    return {"strongest_attacker": "trees", "random_star": random_star,
            "private": {"neural": {"mean": strongest - 0.01, "low": 0.0, "high": 1.0},
                        "trees": {"mean": strongest, "low": 0.0, "high": 1.0}},
            "useful": {"mean": useful, "low": 0.0, "high": 1.0}}


def test_audited_mnag_and_goal_against_written_out_arithmetic(script):
    metrics = {"attributes": {"parity": {"acc_guessing": 0.5, "acc_no_suppr": 0.99},
                              "lt5": {"acc_guessing": 0.5, "acc_no_suppr": 0.98}}}
    device = audit(strongest=0.62, random_star=0.6, useful=0.9)
    expected = (0.9 - 0.5) / (0.99 - 0.5) - (0.62 - 0.5) / (0.98 - 0.5)
    assert script.audited_mnag(metrics, device, ["parity"], ["lt5"]) == pytest.approx(expected)
    below_guessing = audit(strongest=0.4, random_star=0.6, useful=0.9)       # NAG is clipped at 0
    assert script.audited_mnag(metrics, below_guessing, ["parity"], ["lt5"]) == pytest.approx(0.4 / 0.49)
    assert script.audited_mnag(metrics, None, ["parity"], ["lt5"]) is None

    goal = script.goal_verdict(device, mnag=0.7)
    assert goal["gap_points"] == pytest.approx(2.0) and goal["within_5_points"] and goal["met"]
    assert not script.goal_verdict(device, mnag=0.49)["met"]                 # mNAG below 50%
    far = script.goal_verdict(audit(strongest=0.66, random_star=0.6, useful=0.9), mnag=0.9)
    assert far["gap_points"] == pytest.approx(6.0) and not far["within_5_points"] and not far["met"]
    assert not script.goal_verdict(None, 0.9)["met"]


def made_up_central_pass(useful: str, private: str) -> dict:
    """A central PASS entry as docs/pass_results.json and docs/uji_validation.json hold one, with made-up figures
    (a test never reads the committed pages: their figures change with every rerun)."""
    metrics = {"mnag": 0.71, "attributes": {useful: {"acc_guessing": 0.5, "acc_no_suppr": 0.99},
                                            private: {"acc_guessing": 0.5, "acc_no_suppr": 0.98}}}
    return {"task": {"useful": [useful], "private": [private]}, "metrics": metrics, "run_metrics": metrics,
            "bundle_evaluation": audit(strongest=0.62, random_star=0.6, useful=0.9),
            "training": {"epochs": 3, "pretrain_epochs": 1, "fit_seconds": 1.5},
            "timestamp": "2026-01-02 10:00 UTC", "provenance": {"commit": "abcdef1234"}}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One --quick run on digits into a fresh folder: (its stdout, the folder with the JSON and the page)."""
    where = tmp_path_factory.mktemp("pass-federated")
    docs = where / "docs"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--allow-dirty", "--datasets", "digits",
                           "--out", str(where / "runs"), "--docs", str(docs)],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, docs


@pytest.mark.pages
@pytest.mark.boots
def test_quick_run_on_digits_writes_json_and_page(quick_run, tmp_path):
    stdout, made = quick_run
    docs = tmp_path / "docs"
    shutil.copytree(made, docs)
    assert "[pass-federated-results] digits: auditing the bundle" in stdout

    results = json.loads((docs / "pass_federated_results.json").read_text())
    assert results["quick"] is True and results["provenance"]["dirty"] in (True, False)
    entry = results["datasets"]["digits"]
    assert entry["settings"]["partition"] == "iid" and entry["settings"]["clients"] == 2
    federation = entry["federation"]
    assert federation["partition"]["devices"] == 2 == len(federation["rows_per_device"])
    # every training row is a device's or the server's bank pool's, never both
    server = federation["bank_origin"]
    assert server["source"] == "server-split" and server["pool_rows"] > 0
    assert sum(federation["rows_per_device"]) + server["pool_rows"] == entry["metrics"]["n_attacker_train"]
    assert federation["rounds"] == 1 and federation["updates_aggregated"] == 2
    device = entry["bundle_evaluation"]
    assert device["seeds"] == 1 and device["strongest_attacker"] in device["private"]
    assert entry["goal"]["strongest_attacker"] == device["strongest_attacker"]
    assert isinstance(entry["goal"]["met"], bool) and isinstance(entry["audited_mnag"], float)
    central, tappfl = entry["beside"]["pass"], entry["beside"]["tappfl"]
    assert central.get("source") == "docs/pass_results.json" or "missing" in central
    assert tappfl.get("source") == "docs/tappfl_results.json" or "missing" in tappfl

    page = (docs / "pass_federated_results.md").read_text()
    assert page.startswith("# PASS trained federated")
    assert "python scripts/pass_federated_results.py" in page and "--quick" in page
    assert "## digits: private lt5, useful parity" in page and "**Goal**" in page
    assert "pass-federated** (this page)" in page
    if "missing" not in central:
        assert "PASS, central" in page

    (docs / "pass_federated_results.md").unlink()
    again = subprocess.run([sys.executable, str(SCRIPT), "--render-only", "--docs", str(docs)], cwd=REPO, env=ENV,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (docs / "pass_federated_results.md").read_text() == page


def test_ujiindoorloc_runs_on_the_validation_split_with_central_pass_settings(script, tmp_path, monkeypatch):
    """UJIIndoorLoc's devices are trainingData's users, scored on validationData's rows, with the PASS settings of
    the central bundle it is compared with (docs/uji_validation.json's), and that bundle stands beside it."""
    assert script.dataset_options("ujiindoorloc", False) == {"test_split": "validation"}
    assert script.dataset_options("ujiindoorloc", True)["test_split"] == "validation"
    assert script.dataset_options("digits", False) == {} and script.central_pass_settings("digits") == {}

    page = {"mechanisms": {"pass": {"pass_set": {"input_dropout": 0.4, "progress": "false", "mu": "1.0"}}}}
    (tmp_path / "uji_validation.json").write_text(json.dumps(page))
    assert script.central_pass_settings("ujiindoorloc", tmp_path / "uji_validation.json") == {
        "input_dropout": "0.4", "mu": "1.0"}                          # progress is not a setting of the model
    with pytest.raises(SystemExit, match="uji_validation_results.py"):
        script.central_pass_settings("ujiindoorloc", tmp_path / "absent.json")
    assert "missing" in script.beside_validation_pass(tmp_path / "uji_validation.json")   # not audited

    useful, private = (names[0] for names in script.TASKS["ujiindoorloc"][:2])
    entry = made_up_central_pass(useful, private)
    (tmp_path / "uji_validation.json").write_text(json.dumps({"mechanisms": {"pass": entry}}))
    monkeypatch.setattr(script, "BESIDE_UJI_VALIDATION", tmp_path / "uji_validation.json")
    central = script.beside_pass("ujiindoorloc")
    assert central["source"] == "docs/uji_validation.json"
    assert central["bundle_evaluation"] == entry["bundle_evaluation"] and central["mnag"] == 0.71
    assert central["audited_mnag"] == pytest.approx((0.9 - 0.5) / 0.49 - (0.62 - 0.5) / 0.48)


@pytest.mark.skipif(not (Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared")) / "datasets"
                         / "ujiindoorloc.zip").is_file(), reason="needs ../shared/datasets/ujiindoorloc.zip")
def test_ujiindoorloc_devices_are_the_training_users(script):
    """18 users took trainingData.csv; validationData.csv's rows (USERID 0) are scored, never a device."""
    data_path = script.TASKS["ujiindoorloc"][3]
    assert script.devices_by("ujiindoorloc", data_path, script.dataset_options("ujiindoorloc", False), "user") == 18


@pytest.mark.pages
@pytest.mark.boots
def test_refresh_beside_copies_the_comparison_rows_again_and_names_the_refresh(script, quick_run, tmp_path,
                                                                             monkeypatch):
    """A freshly made page's JSON with a stale central row: refreshed, the row is the central PASS page's entry
    as it is now (a made-up one here), the federated figures are untouched, and the page says which run re-read
    them."""
    results = json.loads((quick_run[1] / "pass_federated_results.json").read_text())
    own = json.dumps({name: {k: v for k, v in entry.items() if k != "beside"}
                      for name, entry in results["datasets"].items()}, sort_keys=True)
    results["datasets"]["digits"]["beside"]["pass"] = {"missing": "stale"}
    central = made_up_central_pass("parity", "lt5")
    (tmp_path / "pass_results.json").write_text(json.dumps({"datasets": {"digits": central}}))
    beside_pass, beside_tappfl = script.beside_pass, script.beside_tappfl
    monkeypatch.setattr(script, "beside_pass", lambda dataset: beside_pass(dataset, tmp_path / "pass_results.json"))
    monkeypatch.setattr(script, "beside_tappfl", lambda dataset: beside_tappfl(dataset, tmp_path / "absent.json"))
    fresh = script.refresh_beside(results, allow_dirty=True)
    row = fresh["datasets"]["digits"]["beside"]["pass"]
    assert row["bundle_evaluation"] == central["bundle_evaluation"] and row["mnag"] == central["metrics"]["mnag"]
    assert json.dumps({name: {k: v for k, v in entry.items() if k != "beside"}
                       for name, entry in fresh["datasets"].items()}, sort_keys=True) == own
    page = " ".join(script.markdown(fresh).split())         # the page wraps its paragraphs anywhere
    assert "last re-read by `python " in page and f"from commit {fresh['beside_refreshed']['commit']}" in page


def test_tappfl_rows_come_from_its_shared_audit_per_lambda_and_term_with_intervals(script, tmp_path):
    """TAPPFL's page holds one curve per privacy term, lambda 0 in both: each release once, with the shared audit's
    strongest family and utility intervals and its goal, never a neural-or-trees mean of one seed."""
    def point(lam, term, strongest):
        return {"lam": lam, "term": term, "strongest_attacker": "trees+useful", "random_star": 0.13,
                "strongest": {"mean": strongest, "low": strongest - 0.01, "high": strongest + 0.01},
                "utility": {"mean": 0.5, "low": 0.49, "high": 0.51}, "goal": {"verdict": "not met"}}
    zero = point(0.0, "both", 0.716)
    page = {"provenance": {"command": "python scripts/tappfl_results.py", "commit": "abc", "date": "d"},
            "settings": {"rounds": 20}, "datasets": [{"dataset": "ujiindoorloc", "clients": 100,
                                                       "terms": {"vclub": [zero, point(1.0, "vclub", 0.747)],
                                                                 "ce": [zero, point(1.0, "ce", 0.749)]}}]}
    path = tmp_path / "tappfl_results.json"
    path.write_text(json.dumps(page))
    beside = script.beside_tappfl("ujiindoorloc", path)
    assert sorted((p["lam"], p["term"]) for p in beside["points"]) == [(0.0, "both"), (1.0, "ce"), (1.0, "vclub")]
    row = script.tappfl_row("ujiindoorloc", 100, beside["points"][0])
    assert "TAPPFL, lambda 0 (both)" in row and "trees+useful: 71.6 [70.6, 72.6]" in row and "not met" in row
    assert "+58.6" in row and "one seed" not in row
