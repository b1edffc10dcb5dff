"""scripts/pass_results.py's page renderer: docs/pass_results.md from a tiny hand-made results dict names the
command that regenerates it, the paper's tables it quotes, and every dataset in the JSON."""
from __future__ import annotations

import pytest

from tests.conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("pass_results")


def entry(useful: str, private: str, audit: bool) -> dict:
    """One dataset's entry, shaped as one_dataset() writes it, with made-up figures."""
    attributes = {
        useful: {"role": "useful", "acc_no_suppr": 0.99, "acc_guessing": 0.5, "acc": 0.9, "nag": 0.82,
                 "acc_unfinetuned": 0.91, "nag_unfinetuned": 0.84},
        private: {"role": "private", "acc_no_suppr": 0.98, "acc_guessing": 0.5, "acc": 0.53, "nag": 0.06,
                  "tree_acc": 0.52, "tree_nag": 0.04, "random_star": 0.6, "random_star_source": "public prior"},
    }
    runtime = {"params": 1000, "flops_torch": 2000, "flops_onnx": 2000, "runtime_p50_ms": 0.1, "fps": 1800.0,
               "model_fps": 3700.0, "bytes_per_frame_sample": 256}
    result = {
        "task": {"useful": [useful], "private": [private], "hidden": []},
        "training": {"lambda": 1.0, "mu": 0.2, "epochs": 3, "pretrain_epochs": 0, "bank_size": 64, "fit_seconds": 1.0},
        "metrics": {"mnag": 0.76, "mnag_worst_attacker": 0.78, "n_attacker_train": 128, "n_test": 64,
                    "attributes": attributes},
        "goal": {"private": {private: {"attacker_acc_neural": 0.53, "attacker_acc_tree": 0.52, "random_star": 0.6,
                                       "random_star_source": "public prior", "gap_points": -7.0,
                                       "within_5_points": True}},
                 "mnag": 0.76, "mnag_at_least_50": True, "met": True},
        "runtime_pass": {**runtime, "bytes_per_frame_index": 2},
        "runtime_prgan": {**runtime, "source": "timing only"},
        "validation": [{"status": "passed", "message": "onnxruntime differs from torch by 1e-07"}],
        "timestamp": "2026-01-01T00:00:00Z",
    }
    if audit:
        interval = {"mean": 0.55, "low": 0.5, "high": 0.6}
        result["bundle_evaluation"] = {"private": {"neural": interval, "exact posterior (bank index)": interval},
                                       "useful": {"mean": 0.9, "low": 0.88, "high": 0.92}, "seeds": 3,
                                       "attacker_epochs": 20, "backend": "onnxruntime", "random_star": 0.6,
                                       "strongest_attacker": "exact posterior (bank index)",
                                       "goal": {"strongest_within_5_points_of_random_star": True}}
    return result


def test_the_page_names_command_paper_tables_and_every_dataset(script):
    results = {"cpu": {"model": "Test CPU", "logical_cores": 2}, "timestamp": "2026-01-01T00:00:00Z",
               "goal": "strongest within 5 points of Random* and mNAG >= 50%",
               "datasets": {"digits": entry("parity", "lt5", audit=True),
                            "toy-sensor": entry("activity", "gender", audit=False),
                            "missing-data": {"skipped": "data not found"}}}
    page = script.markdown(results)
    assert "`python scripts/pass_results.py`" in page and "--render-only" in page
    assert "a commit not recorded" in page                   # no provenance in this JSON: none invented
    for table in ("Table 7", "Table 14", "Table 16"):
        assert f"**{table}," in page
    assert "## The paper's figures beside ours" in page and "differ from the paper's" in page
    for name in ("digits", "toy-sensor", "missing-data"):
        assert f"## {name}" in page
    assert "55.0 [50.0, 60.0]" in page                       # the audit's interval, as the JSON holds it
    assert "not audited over seeds" in page                  # and the dataset without one says so
    assert "98.1±0.3" in page and "72.9±0.2" in page         # the paper's PASS mNAG, Motion Sense and CelebA
    prose = [line for line in page.splitlines() if not line.startswith(("|", "!["))]
    assert all(len(line) <= 120 for line in prose)


def test_the_header_is_the_shared_one_when_provenance_is_recorded(script):
    record = {"command": "python scripts/pass_results.py --datasets digits", "date": "2026-01-02 10:00 UTC",
              "host": "Test CPU, 2 logical cores, Linux x86_64", "commit": "abcdef1234", "dirty": False}
    results = {"cpu": {"model": "Test CPU", "logical_cores": 2}, "goal": "g", "provenance": record,
               "datasets": {"digits": {**entry("parity", "lt5", audit=True), "provenance": record}}}
    page = script.markdown(results)
    assert "commit abcdef1234" in page and "`python scripts/pass_results.py --datasets digits`" in page
