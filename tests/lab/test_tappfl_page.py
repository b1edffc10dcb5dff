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
    raw_rows = script.RawAttackersOnce()
    raw_rows.start(auditing_raw=True)
    raw_rows.put("trees", 0, "trees on raw rows")
    assert raw_rows.get("raw-data trees", 0) == "trees on raw rows"
    assert raw_rows.get("raw-data neural (and re-id)", 0) is None              # not trained yet: train it
    raw_rows.put("raw-data neural (and re-id)", 0, ("neural on raw rows", "the same rows"))
    raw_rows.start(auditing_raw=False)                                          # a representation's audit
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


def test_over_federations_is_a_t_interval_widened_by_the_audits_error(script):
    """Three federations' means 60, 63, 66 (one attacker seed each, 1,000 test rows): s = 0.03 and t(0.975, 2) =
    4.3027, so the t half-width is 4.3027 * 0.03 / sqrt(3) = 0.07452; the audits' variances 0.6*0.4, 0.63*0.37,
    0.66*0.34 over 1,000 sum to 0.0006975, so the widening is 1.96 * sqrt(0.0006975) / 3 = 0.01725; the half-width
    sqrt(0.07452^2 + 0.01725^2) = 0.07650, the interval [55.35, 70.65]."""
    def fed(mean, runs=None):
        return {"mean": mean, "low": 0.0, "high": 1.0, "runs": runs or [mean]}
    figure = script.over_federations([fed(0.60), fed(0.63), fed(0.66)], [1000, 1000, 1000])
    assert figure["mean"] == pytest.approx(0.63) and figure["runs"] == [0.60, 0.63, 0.66]
    assert figure["federations"] == 3 and figure["between_half"] == pytest.approx(0.074524, abs=1e-6)
    assert figure["within_half"] == pytest.approx(0.017255, abs=1e-6)
    assert (figure["low"], figure["high"]) == (pytest.approx(0.553504, abs=1e-6), pytest.approx(0.706496, abs=1e-6))
    # the attacker seeds' spread counts in v_i as in the audit: runs 50, 60, 70 give 0.01 / 3 + 0.6 * 0.4 / 100 =
    # 0.0057333, beside 0.7 * 0.3 / 100 = 0.0021; t(0.975, 1) = 12.706: the half-width is
    # sqrt((12.706 * 0.070711 / sqrt(2))^2 + (1.96 * sqrt(0.0078333) / 2)^2) = 0.64121, clipped to [0, 1]
    two = script.over_federations([fed(0.6, [0.5, 0.6, 0.7]), fed(0.7, [0.7, 0.7, 0.7])], [100, 100])
    assert two["between_half"] == pytest.approx(0.635310, abs=1e-6) and two["within_half"] == pytest.approx(
        0.086736, abs=1e-6)
    assert two["low"] == pytest.approx(0.65 - 0.641204, abs=1e-6) and two["high"] == 1.0
    # one federation: its figure as it is, the audit's own interval
    one = fed(0.6)
    assert script.over_federations([one], [1000]) is one


def test_a_release_over_federations_takes_means_and_keeps_every_federation(script):
    """The strongest family is the one of highest mean over federations (not each federation's own), Random* and
    the goal are on the means, a part whose interval reaches its threshold is marked, and each federation's
    figures stay in "federations"."""
    raws = [{**audited(0.99, 0.86, random_star=star), "has_power": True} for star in (0.58, 0.60, 0.62)]
    raw = script.raw_over_federations(raws)
    assert raw["random_star"] == pytest.approx(0.60) and raw["random_star_runs"] == [0.58, 0.60, 0.62]
    assert raw["has_power"] and raw["utility"]["mean"] == pytest.approx(0.86) and len(raw["federations"]) == 3
    reference = {"random_guess_private": 0.5, "n_private": 2, "random_star": raw["random_star"]}
    feds = []
    for seed, (trees_useful, neural) in enumerate([(0.62, 0.66), (0.64, 0.58), (0.66, 0.58)]):
        p = point(script, 1.0, "vclub", 0.56, 0.84, 0.50 + 0.01 * seed, raws[seed])
        p["private"]["trees+useful"], p["private"]["neural"] = figure(trees_useful), figure(neural)
        p["random_star"] = raws[seed]["random_star"]
        p["deployed"] = script.compatible(p, reference)
        feds.append(p)
    merged = script.release_over_federations(feds, raw, reference)
    # trees+useful: 62, 64, 66 (mean 64); neural 66, 58, 58 (mean 60.7), although neural is federation 0's strongest
    assert merged["strongest_attacker"] == "trees+useful" and merged["strongest"]["mean"] == pytest.approx(0.64)
    assert merged["strongest"]["runs"] == [0.62, 0.64, 0.66] and merged["random_star"] == pytest.approx(0.60)
    # 64 <= 60 + 5: privacy holds on the mean; the interval (t half-width 4.3027 * 0.02 / sqrt(3) = 0.0497) reaches
    # past 65, so it straddles; utility 84 in all three (s = 0): the audits' error alone, 1.96 * sqrt(3 * 0.84 *
    # 0.16 / 599) / 3 = 0.0170, keeps [82.3, 85.7] above 86 - 5
    assert merged["goal"]["verdict"] == "met" and merged["goal"]["straddles"] == {"privacy": True, "utility": False}
    assert merged["utility"]["high"] == pytest.approx(0.84 + 1.96 * (3 * 0.84 * 0.16 / 599) ** 0.5 / 3)
    assert merged["paper"]["accuracy"]["mean"] == pytest.approx(0.51) and merged["paper"]["at_chance"]
    assert [f["seed"] for f in merged["federations"]] == [0, 1, 2] and merged["runs"] == [p["run"] for p in feds]
    assert merged["federations"][0]["strongest"] is feds[0]["strongest"]
    assert merged["deployed"]["tree_acc_private"] == pytest.approx(feds[0]["private"]["trees"]["mean"])
    assert merged["devices"]["ce_over_ln_k"] == pytest.approx(0.995) and merged["devices"]["dropped"] == 0
    # one federation: the point as it is
    assert script.release_over_federations(feds[:1], raws[0], reference) is feds[0]
    # the page says how the interval is formed and shows each federation's mean
    results = made_up_results(script)
    data = results["datasets"][0]
    data.update(federation_seeds=3, raw=raw, terms={"vclub": [merged]}, points=[merged])
    page = script.markdown(results)
    assert "**3 trained federations per release**" in page and "(4.30 for F = 3)" in page
    assert "sqrt((t s / sqrt(F))^2 + 1.96^2 (v_1 + ... + v_F) / F^2)" in page
    assert "trees+useful: 64.0 [" in page and "(per federation 62.0, 64.0, 66.0)" in page
    assert "| within (straddles) | within | yes | met |" in page
    assert "Random* 60.0% (per federation 58.0, 60.0, 62.0)" in page


def test_a_run_keeps_the_datasets_it_did_not_run(script):
    """A JSON from before entries carried their origin (UJIIndoorLoc, one federation) and a digits run: the
    merged JSON has both, UJIIndoorLoc first with its own command and commit, digits replaced by the new run."""
    old = made_up_results(script)
    uji = {**old["datasets"][0], "dataset": "ujiindoorloc"}
    old_digits = {**old["datasets"][0], "seconds": 1.0}
    old.update(provenance={"command": "python scripts/tappfl_results.py --datasets ujiindoorloc",
                           "commit": "6db4bfad6f", "date": "2026-11-28 20:56 UTC", "host": "AMD EPYC", "dirty": False},
               datasets=[uji, old_digits])
    new = made_up_results(script)
    new["provenance"] = {"command": "python scripts/tappfl_results.py --datasets digits --federation-seeds 3",
                         "commit": "abcdef1234", "date": "2026-11-29 03:00 UTC", "host": "AMD EPYC", "dirty": False}
    new["datasets"][0]["seconds"] = 2.0
    results = script.merged(new, old)
    assert [data["dataset"] for data in results["datasets"]] == ["ujiindoorloc", "digits"]
    kept, ran = results["datasets"]
    assert kept["provenance"]["commit"] == "6db4bfad6f" and kept["command"] == old["command"]
    assert kept["settings"] == old["settings"] and ran["seconds"] == 2.0 and ran["provenance"]["commit"] == "abcdef1234"
    assert results["provenance"]["commit"] == "abcdef1234"
    # merging again (the merged JSON as the previous one) keeps each entry's own origin
    again = script.merged({**new, "datasets": [new["datasets"][0]]}, json.loads(json.dumps(results)))
    assert again["datasets"][0]["provenance"]["commit"] == "6db4bfad6f"
    assert script.merged(new, None)["datasets"] == [{**new["datasets"][0], "provenance": new["provenance"],
                                                     **{key: new.get(key) for key in script.ORIGIN_KEYS}}]
    page = script.markdown({**results, "tsne": [{"dataset": "digits", "lam": 1.0, "term": "vclub"}]})
    uji_section = page.split("## ujiindoorloc")[1].split("## digits")[0]
    assert "This section comes from an earlier run" in uji_section and "commit 6db4bfad6f" in uji_section
    assert "**One trained federation per release** (federation seed 0)" in uji_section
    assert "earlier run" not in page.split("## digits")[1].split("The t-SNE")[0]
    assert "The t-SNE shows digits: lambda 1, vCLUB, eq. 2, federation seed 0" in page
    assert "Not shown: ujiindoorloc" in page


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
