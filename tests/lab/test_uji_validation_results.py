"""scripts/uji_validation_results.py: a --quick run on UJIIndoorLoc's validation split writes the
JSON and the page (PASS and PR-GAN's bundle audits beside the raw-data reference, the settings given with
--pass-set, the goal's verdict), --render-only rewrites the same page from the JSON, and the goal's arithmetic
matches a computation written out here. --select chooses PASS's setting on the loader's held-out-users split
(trainingData users held out, validationData never loaded) by a rule checked against one written out here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sensorveil_lab import uji_pass_settings
from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "uji_validation_results.py"


def run_script(uji_zip: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SENSORVEIL_SHARED": str(uji_zip.parents[1]), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def script():
    return load_script("uji_validation_results")   # what it shares with other pages it imports from sensorveil_lab


@pytest.fixture(scope="module")
def settings():
    return uji_pass_settings   # PASS's --select and the sweep's record, which the script imports


def figure(mean: float) -> dict:
    return {"mean": mean, "low": max(0.0, mean - 0.05), "high": min(1.0, mean + 0.05), "runs": [mean]}


def test_goal_verdict_against_written_out_arithmetic(script):
    private = {"neural": figure(0.16), "trees": figure(0.19), "logistic": figure(0.12)}
    goal = script.verdict(figure(0.80), private, random_star=0.15)
    assert goal["strongest_attacker"] == "trees" and goal["gap_points"] == pytest.approx(100 * (0.19 - 0.15))
    assert goal["utility_at_least_75"] and goal["privacy_kept"] and goal["met"]
    assert not script.verdict(figure(0.74), private, 0.15)["met"]                 # utility below 75%
    leaky = script.verdict(figure(0.9), {**private, "trees+useful": figure(0.21)}, 0.15)
    assert leaky["gap_points"] == pytest.approx(6.0) and not leaky["privacy_kept"] and not leaky["met"]


def test_sweep_keeps_other_settings_and_drops_quick_points_on_a_full_run(script):
    point = lambda settings, quick: {"pass_set": settings, "quick": quick}  # noqa: E731
    earlier = [point({"input_dropout": "0.4"}, False), point({"input_dropout": "0.2"}, False),
               point({"input_dropout": "0.4"}, True)]
    merged = script.merged_sweep(earlier, point({"input_dropout": "0.4"}, False))
    assert merged == [point({"input_dropout": "0.2"}, False), point({"input_dropout": "0.4"}, False)]
    assert len(script.merged_sweep(earlier, point({"mu": "0.5"}, True))) == 4


def test_select_rule_against_written_out_choice(settings):
    def point(value, floor, gap):
        return {"value": value, "floor_acc": figure(floor), "gap_points": gap, "privacy_kept": gap <= 5}
    assert settings.choose([point("0.2", 0.80, 7.0), point("1", 0.78, 4.0), point("2", 0.70, 1.0)]) == "1"
    assert settings.choose([point("2", 0.78, 1.0), point("0.5", 0.78, 2.0)]) == "0.5"         # tie: the smaller
    assert settings.choose([point("0.2", 0.80, 9.0), point("1", 0.60, 6.0)]) == "1"          # none kept: least gap
    assert settings.select_values("mu=0.2, 0.5,1") == ("mu", ["0.2", "0.5", "1"])
    for bad in ("mu", "=0.2,1", "mu=0.2,high"):
        with pytest.raises(SystemExit, match="--select takes KEY=V1,V2,..."):
            settings.select_values(bad)


@pytest.mark.trains
def test_held_out_users_split(uji_zip):
    """Loader option test_split=held-out-users: whole trainingData users (and so their phones) are the test rows."""
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.datasets.ujiindoorloc import UJI_HELD_OUT_USERS
    from sensorveil.sdk.evaluation import dataset_slices
    from sensorveil.sdk.mechanisms.pass_parts.data import split_rows
    for max_rows in (None, 400):
        data = load_dataset("ujiindoorloc", uji_zip, split="train", test_split="held-out-users", max_rows=max_rows)
        user = np.asarray(data.class_names["user"]).astype(int)[data.attributes["user"]]
        held, split = np.isin(user, UJI_HELD_OUT_USERS), data.attributes["trial_split"]
        assert len(data) == (max_rows or 19937) and held.sum() == (122 if max_rows else 6058)
        assert np.array_equal(data.test_rows, np.flatnonzero(held)) and np.array_equal(split, held)
        assert set(user[split == 0]).isdisjoint(UJI_HELD_OUT_USERS) and 0 not in set(user)   # no validationData row
        phone, floor = data.attributes["phone"], data.attributes["floor"]
        assert set(phone[held]).isdisjoint(phone[~held])                     # their phones are new too
        assert set(floor[held]) == set(floor[~held]) == set(range(13))
        assert np.array_equal(dataset_slices(data, "floor", "region", 0)["test"], data.test_rows)
        assert np.array_equal(split_rows(data, "floor", "region", 0)[1], data.test_rows)
    # region edges from the other users' rows: every region has training rows
    assert np.unique(data.attributes["region"][~held]).size == 104


@pytest.mark.pages
@pytest.mark.boots
def test_quick_run_writes_json_and_page(uji_zip, tmp_path):
    docs, out = tmp_path / "docs", tmp_path / "runs"
    json_path, page = docs / "uji_validation.json", docs / "uji_validation.md"
    done = run_script(uji_zip, "--quick", "--allow-dirty", "--out", str(out), "--json", str(json_path),
                      "--markdown", str(page), "--pass-set", "input_dropout=0.3", "mu=0.5")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for step in ("raw-data reference", "PASS: training", "PASS: auditing the bundle", "PR-GAN: training",
                 "PR-GAN: auditing the bundle", "wrote"):
        assert f"[uji-validation] {step}" in done.stdout, step

    results = json.loads(json_path.read_text())
    assert results["generated_by"] == "scripts/uji_validation_results.py" and results["quick"] is True
    assert results["dataset_options"]["test_split"] == "validation" and results["dataset_options"]["max_rows"]
    assert results["provenance"]["dirty"] in (True, False) and results["provenance"]["commit"]
    assert "75%" in results["goal"] and "Random*" in results["goal"]
    raw = results["raw"]
    assert raw["n_train"] > raw["n_validation"] > 0 and set(raw["private"]) == {"neural", "trees"}
    assert 0.0 <= raw["floor_acc"]["low"] <= raw["floor_acc"]["mean"] <= raw["floor_acc"]["high"] <= 1.0
    assert list(results["mechanisms"]) == ["pass", "prgan"]
    for name, entry in results["mechanisms"].items():
        assert entry["dataset_record"]["options"]["test_split"] == "validation", name
        device, goal = entry["bundle_evaluation"], entry["goal"]
        assert device["n_test"] == raw["n_validation"] and device["n_attacker_train"] == raw["n_train"], name
        assert device["random_star"] == pytest.approx(raw["goal"]["random_star"]), name
        strongest = max(device["private"].values(), key=lambda f: f["mean"])["mean"]
        assert goal["gap_points"] == pytest.approx(100 * (strongest - device["random_star"])), name
        assert goal["floor_acc"]["mean"] == pytest.approx(device["useful"]["mean"]), name
        assert goal["met"] == (device["useful"]["mean"] >= 0.75 and goal["gap_points"] <= 5), name
        assert "<out>" in entry["bundle"] and str(tmp_path) not in json.dumps(entry), name
    pass_entry = results["mechanisms"]["pass"]
    assert pass_entry["pass_set"]["input_dropout"] == "0.3" and pass_entry["pass_set"]["mu"] == "0.5"
    assert pass_entry["config"]["input_dropout"] == pytest.approx(0.3) and pass_entry["config"]["mu"] == 0.5
    assert results["mechanisms"]["prgan"]["config"]["utility_threshold"] == pytest.approx(0.75)
    assert [point["pass_set"]["input_dropout"] for point in results["pass_sweep"]] == ["0.3"]

    text = page.read_text()
    flat = " ".join(text.split())   # paragraphs are wrapped at 120 columns
    assert text.startswith("# UJIIndoorLoc's validation rows") and "Generated by `python" in flat
    assert "--allow-dirty" in flat and "Made with --quick" in flat and results["goal"] in flat
    for row in ("| raw data (no mechanism) |", "| PASS bundle |", "| PR-GAN bundle |", "## PASS settings tried",
                "## The command"):
        assert row in text, row
    swept = [line for line in text.splitlines() if line.startswith("| input_dropout=0.3,")]
    assert len(swept) == 1 and "mu=0.5" in swept[0] and "(--quick)" in swept[0], swept
    verdict = "**Met**" if any(e["goal"]["met"] for e in results["mechanisms"].values()) else "**Not met**"
    assert verdict in text and results["pass_selection"] is None and "not chosen by `--select`" in flat

    again = docs / "again.md"
    done = run_script(uji_zip, "--render-only", "--json", str(json_path), "--markdown", str(again))
    assert done.returncode == 0, done.stderr[-3000:]
    assert again.read_text() == text


@pytest.mark.pages
@pytest.mark.boots
@pytest.mark.trains
def test_quick_run_with_select(uji_zip, tmp_path):
    """--select mu=0.2,1: PASS trained and audited per value on held-out users, the rule's value used on the page."""
    json_path, page, out = tmp_path / "uji.json", tmp_path / "uji.md", tmp_path / "runs"
    done = run_script(uji_zip, "--quick", "--allow-dirty", "--out", str(out), "--json", str(json_path),
                      "--markdown", str(page), "--mechanisms", "pass", "--select", "mu=0.2,1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout
    assert log.index("[uji-validation] selection: mu=0.2") < log.index("[uji-validation] selection: mu=1") \
        < log.index("chosen (") < log.index("[uji-validation] raw-data reference")
    results = json.loads(json_path.read_text())
    selection = results["pass_selection"]
    assert selection["dataset_options"] == {"split": "train", "test_split": "held-out-users", "max_rows": 400}
    assert [point["value"] for point in selection["points"]] == ["0.2", "1"]
    for point in selection["points"]:
        assert (point["n_train"], point["n_test"]) == (278, 122) and point["privacy_kept"] == (point["gap_points"] <= 5)
    kept = [p for p in selection["points"] if p["privacy_kept"]] or None
    best = (max(kept, key=lambda p: (p["floor_acc"]["mean"], -float(p["value"]))) if kept
            else min(selection["points"], key=lambda p: (p["gap_points"], float(p["value"]))))
    assert selection["chosen"] == best["value"]
    assert results["mechanisms"]["pass"]["pass_set"]["mu"] == selection["chosen"]
    assert results["mechanisms"]["pass"]["dataset_record"]["options"]["test_split"] == "validation"
    text = page.read_text()
    flat = " ".join(text.split())
    assert "## How the setting was chosen" in text and f"Chosen: **mu={selection['chosen']}**" in flat
    assert "validationData rows played no part in the choice" in flat and "## PASS settings tried" in text
    rows = [line for line in text.splitlines() if line.startswith(("| 0.2 |", "| 1 |"))]
    assert len(rows) == 2 and sum("**chosen**" in row for row in rows) == 1
    again = tmp_path / "again.md"
    done = run_script(uji_zip, "--render-only", "--json", str(json_path), "--markdown", str(again))
    assert done.returncode == 0 and again.read_text() == text
