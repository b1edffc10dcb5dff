#!/usr/bin/env python
"""TAPPFL at its paper's scale, through the audit every mechanism's page uses: 100 devices in Flower's
simulation with rho = 0.1 (10 updates averaged a round) on UJIIndoorLoc (private region, useful floor), both
privacy terms of the paper run side by side, each lambda's f exported to ONNX and its representation audited
(sensorveil/sdk/audit.py: every attacker family over 3 seeds, 95% intervals), the raw-data rows (attackers and
utility probe on the raw rows), the paper's own measure (the devices' g on their held-out rows) with where it
sits at chance, and the goal. Written to docs/tappfl_results.{json,md,png} and docs/tappfl_tsne.png:

    python scripts/tappfl_results.py [--datasets ujiindoorloc digits] [--lambdas 0 0.5 1]
                                     [--privacy-terms vclub ce] [--rounds 20] [--seeds 3] [--federation-seeds 1]
    python scripts/tappfl_results.py --render-only     # the page again from docs/tappfl_results.json

A run writes the datasets it ran and keeps the others' entries of the JSON already in --docs (each entry records
the command, commit and settings it came from), so ``--datasets digits`` adds digits beside UJIIndoorLoc.

``--federation-seeds N`` trains every release as N federations, seeds 0..N-1. The seed is the run's (train_run's
seed, TAPPFLConfig.seed): it draws the protocol's split (which rows train the devices, which the attackers, which
are the test rows), the device partition and held-out rows, f's initialisation and pre-training, the devices'
networks and batches and the devices sampled each round. So each seed is the whole pipeline again: its own
pre-training, its own raw-data audit (the raw rows' attackers and Random* on its split) and its own releases,
each exported and audited as with one federation. Per release the page gives the mean over federations of each
family, of the utility probe and of the paper's measure, with the interval of ``over_federations``; the JSON
keeps every federation's figures. With N = 1 the figures are the audit's own, as before.

The two privacy terms (config privacy_bound): ``vclub``, eq. 2's variational upper bound I_vCLUB(r; u) =
E_p(r,u)[log q(u|r)] - E_p(r)p(u)[log q(u|r)], which f minimises; ``ce``, eq. 4 and 7's adversarial form, the
bound's first term alone (f maximises g's cross-entropy, "Implementation in practice"; the authors' code).
At lambda 0 the privacy term has weight 0 and the two are one run, shown once.

Digits' 1,198 training rows are too few for 100 devices (12 rows each): digits runs at 4 devices of ~300 rows
(the paper's rows per device) with rho 0.5, 2 updates averaged a round (rho 0.1 would average max(1,
round(0.4)) = 1 update, one device's f); the page says so.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sensorveil.export import export_run
from sensorveil.sdk import mechanisms
from sensorveil.sdk.audit import FAMILIES, GOAL_MARGIN, REID, REID_OMNI, Release, audit, interval
from sensorveil.sdk.audit_cache import RawAttackersOnce
from sensorveil.sdk.mechanisms.tappfl import flower_version
from sensorveil.sdk.runs import read_run, train_run
from sensorveil_lab.page_text import cell, families_text
from sensorveil_lab.page_text import percent as pct
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
# devices and rho per dataset: UJIIndoorLoc at the paper's 100 devices and 10%; digits (see the docstring) small
DATASETS = {"ujiindoorloc": {"useful": "floor", "private": "region", "uji": True, "clients": 100, "fraction": 0.1},
            "digits": {"useful": "parity", "private": "lt5", "uji": False, "clients": 4, "fraction": 0.5}}
TERMS = {"vclub": "vCLUB, eq. 2", "ce": "CE, eq. 4/7"}
UTILITY_MARGIN = 0.05     # the utility probe on the release at most 5 points under the same probe on raw data
TSNE_ROWS = 800
# Table 2's inference accuracy by lambda (tappfl.md lines 156-164) for the nearest row the paper has: digits'
# binary lt5 beside CIFAR10's binary "animal or not"; UJIIndoorLoc has no comparable row.
PAPER_TABLE2 = {"digits": ("CIFAR10, animal or not", {0.0: 0.74, 0.25: 0.64, 0.5: 0.60, 0.75: 0.56, 1.0: 0.52})}


# ---------------------------------------------------------------------------------------------- running
def dataset_settings(name: str, args) -> dict:
    spec = DATASETS[name]
    return {"clients": args.clients or spec["clients"], "fraction": args.fraction or spec["fraction"]}


def federation_settings(args, setup: dict, **extra) -> dict:
    """The paper's setting (TAPPFLConfig defaults: batch 10, SGD lr 0.01) at this page's scale: rho M devices
    sampled a round, train and are averaged (``--participation``); the devices evaluated in the last round (and
    every ``--evaluate-every``); no update filter (norm_multiple 0): the paper averages every sampled update."""
    settings = {**setup, "rounds": args.rounds, "local_epochs": args.local_epochs, "participation": args.participation,
                "evaluate_every": args.evaluate_every or args.rounds, "norm_multiple": 0.0,
                "timeout_s": args.timeout_s, "progress": True, "reference_attacks": False,
                "release_attacks": False}
    return {key: str(value) for key, value in {**settings, **extra}.items()}


def train(name: str, args, setup: dict, out: Path, seed: int = 0, **settings) -> Path:
    spec = DATASETS[name]
    return train_run("tappfl", name, data_path=args.uji if spec["uji"] else None, useful=spec["useful"],
                     private=spec["private"], out=out, attacker_epochs=args.attacker_epochs, seed=seed,
                     settings=federation_settings(args, setup, **settings))


def suffix(seed: int) -> str:
    """A federation's folder suffix: none for seed 0 (the folders of a one-federation run), "-fed<seed>" else."""
    return "" if seed == 0 else f"-fed{seed}"


def pretrain(name: str, args, setup: dict, out: Path, seed: int = 0) -> Path:
    """The shared starting point: rounds of the utility term alone (the paper's "we first pretrain the feature
    extractor network only"); its last round is a TAPPFL round at lambda 0 (rounds=0 is refused), whose update of
    f is the utility term alone as a pre-training round's is (eq. 7 at lambda 0)."""
    return train(name, args, setup, out / f"{name}-pretrain{suffix(seed)}", seed=seed, rounds=1, lam=0.0,
                 pretrain_rounds=max(args.pretrain_rounds - 1, 0))


def summary(result: dict) -> dict:
    """What the page keeps of one audit: every family's interval, the strongest, the utility probe, Random*.
    The audit's re-id attackers are left out: the audit runs none on a representation, and on the raw rows the
    re-id network is the raw-data neural attacker itself, one seed."""
    private = {name: figure for name, figure in result["private"].items() if name not in (REID, REID_OMNI)}
    strongest = max(private, key=lambda name: private[name]["mean"])
    return {"private": private, "strongest_attacker": strongest, "strongest": result["private"][strongest],
            "utility": result["useful"], "random_star": result["random_star"], "n_train": result["n_attacker_train"],
            "n_test": result["n_test"]}


def audited(release: Release, args, raw_rows: RawAttackersOnce) -> dict:
    return summary(audit(release, seeds=args.seeds, attacker_epochs=args.attacker_epochs, log=progress,
                         cache=raw_rows.start(auditing_raw=release.raw_task is None)))


def raw_audit(pre_dir: Path, args, raw_rows: RawAttackersOnce) -> tuple[dict, dict]:
    """The raw-data rows: the same audit on the raw protocol rows (no mechanism), and whether it has power (the
    strongest family on raw data beyond Random* + 5 points; if not, no release could show protection)."""
    mechanism, run = mechanisms.get("tappfl"), read_run(pre_dir)
    task, _ = mechanism.task(pre_dir, run)
    raw = audited(Release(task, task.x[task.attacker_train], task.x[task.test]), args, raw_rows)
    raw["has_power"] = raw["strongest"]["mean"] > raw["random_star"] + GOAL_MARGIN
    reference = {"random_guess_private": 1.0 / task.n_private, "n_private": int(task.n_private),
                 "random_star": raw["random_star"]}
    return raw, reference


def progress(line: str) -> None:
    print(f"[tappfl-results] {line}", flush=True)


def paper_measure(run, heldout_rows: int, n_private: int) -> dict:
    """The paper's inference accuracy (the devices' own g on their held-out rows, pooled over the devices the
    last round evaluated) with a binomial 95% interval over those rows, and whether it sits at chance: the
    interval reaches 1/K (Table 2's random guess)."""
    metrics = run["metrics"]
    accuracy = metrics.get("paper_inference_accuracy")
    if accuracy is None:
        return {"accuracy": None}
    devices, total = metrics["paper_inference_devices"], run["config"]["clients"]
    n = max(1, round(heldout_rows * devices / total))
    figure = interval([accuracy], n)
    chance = 1.0 / n_private
    return {"accuracy": figure, "devices": devices, "heldout_rows": n, "chance": chance,
            "at_chance": figure["low"] <= chance}


def device_losses(run, n_private: int) -> dict:
    """Figure 2's figures from the last TAPPFL round: the devices' CE of g (eq. 3), its ratio to ln K (the CE of
    a g that reads nothing of r, with balanced classes), the JSD estimate and the privacy term f descended."""
    rounds = [entry for entry in run["federation"]["rounds"] if entry["phase"] == "tappfl"]
    last = rounds[-1]["train"]
    return {"ce": last.get("ce"), "ce_over_ln_k": None if last.get("ce") is None else last["ce"] / math.log(n_private),
            "jsd": last.get("jsd"), "vclub": last.get("vclub"), "neg_ce": last.get("neg_ce"),
            "updates_per_round": float(np.mean([entry["devices"] for entry in rounds])),
            "dropped": int(sum(len(entry.get("dropped", [])) for entry in rounds))}


def goal(point: dict, raw: dict) -> dict:
    """The goal of a release, each part named; "met" only when every part holds."""
    parts = {"privacy": point["strongest"]["mean"] <= point["random_star"] + GOAL_MARGIN,
             "utility": point["utility"]["mean"] >= raw["utility"]["mean"] - UTILITY_MARGIN,
             "power": raw["has_power"]}
    verdict = "met" if all(parts.values()) else "no power" if not parts["power"] else "not met"
    return {**parts, "verdict": verdict}


def compatible(audited: dict, reference: dict) -> dict:
    """The per-lambda figures other pages read (make_results.py, pass_federated_results.py): the audit's means."""
    neural, trees = audited["private"]["neural"]["mean"], audited["private"]["trees"]["mean"]
    return {"probing_acc_private": neural, "tree_acc_private": trees, "probing_acc_useful": audited["utility"]["mean"],
            "worst_gap_private": max(neural, trees) - reference["random_guess_private"],
            "random_star": audited["random_star"], "figures": "means over the audit's seeds"}


def lambda_point(name: str, lam: float, term: str, setup: dict, pre_dir: Path, args, out: Path, raw: dict,
                 reference: dict, raw_rows: RawAttackersOnce, seed: int = 0) -> dict:
    """One release of one federation: train from the federation's pre-trained f with one privacy term at one
    lambda, export f to ONNX, audit what the bundle emits (as a device computes it), and read the paper's measure
    from the run."""
    from sensorveil.runtime import Privatizer
    label = f"{name}-lam{lam:g}" + ("" if lam == 0 else f"-{term}") + suffix(seed)
    run_dir = train(name, args, setup, out / label, seed=seed, lam=lam, privacy_bound=term, pretrained=pre_dir,
                    pretrain_rounds=0)
    run, mechanism = read_run(run_dir), mechanisms.get("tappfl")
    bundle = export_run(run_dir, "onnx", out / f"{label}-bundle", attacker_epochs=0)
    release = mechanism.release(run_dir, run, Privatizer.load(bundle, backend="onnxruntime"))
    # the release names its raw task (sdk/audit.py), so the audit's power attackers are the raw rows' ones, read
    # back from the raw audit; the page's raw-data rows are that audit's, once per dataset
    point = audited(release, args, raw_rows)
    point.update(lam=lam, term="both" if lam == 0 and len(args.privacy_terms) > 1 else term, run=str(run_dir),
                 bundle=str(bundle), wall_seconds=run["federation"]["wall_seconds"],
                 paper=paper_measure(run, run["federation"]["partition"]["heldout"]["rows"],
                                     reference["n_private"]),
                 devices=device_losses(run, reference["n_private"]))
    point["goal"] = goal(point, raw)
    point["deployed"] = compatible(point, reference)
    progress(f"{label}: strongest {point['strongest_attacker']} {point['strongest']['mean']:.3f}, utility "
             f"{point['utility']['mean']:.3f}, paper's measure {(point['paper'].get('accuracy') or {}).get('mean')}, "
             f"goal {point['goal']['verdict']} ({time.strftime('%H:%M:%S')})")
    return point


def federation(name: str, args, setup: dict, out: Path, seed: int) -> dict:
    """One federation seed, the whole pipeline: its pre-training, its raw-data audit (the split is the seed's, so
    the raw rows' attackers and Random* are too; the cache of raw-row attackers is this seed's alone) and every
    release from its pre-trained f."""
    pre_dir = pretrain(name, args, setup, out, seed)
    pre = read_run(pre_dir)
    raw_rows = RawAttackersOnce()
    raw, reference = raw_audit(pre_dir, args, raw_rows)
    progress(f"{name} federation seed {seed}, raw data: strongest {raw['strongest_attacker']} "
             f"{raw['strongest']['mean']:.3f}, utility {raw['utility']['mean']:.3f}, Random* {raw['random_star']:.3f}")
    points = {(lam, term): lambda_point(name, lam, term, setup, pre_dir, args, out, raw, reference, raw_rows, seed)
              for lam in args.lambdas for term in (args.privacy_terms[:1] if lam == 0 else args.privacy_terms)}
    return {"seed": seed, "raw": raw, "reference": reference, "points": points,
            "pretrained": {"wall_seconds": pre["federation"]["wall_seconds"]},
            "partition": pre["federation"]["partition"]}


def run_dataset(name: str, args, out: Path) -> tuple[dict, dict]:
    started, setup = time.time(), dataset_settings(name, args)
    runs = [federation(name, args, setup, out, seed) for seed in range(args.federation_seeds)]
    raw = raw_over_federations([run["raw"] for run in runs])
    reference = {**runs[0]["reference"], "random_star": raw["random_star"]}
    points = [release_over_federations([run["points"][key] for run in runs], raw, reference)
              for key in runs[0]["points"]]
    terms = {term: [p for p in points if p["term"] in (term, "both")] for term in args.privacy_terms}
    spec = DATASETS[name]
    result = {"dataset": name, "useful": spec["useful"], "private": spec["private"], **setup,
              "participation": args.participation, "federation_seeds": args.federation_seeds,
              "reference": reference, "raw": raw, "terms": terms,
              "points": terms[args.privacy_terms[0]],     # one curve for the pages that read "points"
              "pretrained": {"wall_seconds": runs[0]["pretrained"]["wall_seconds"]},
              "partition": runs[0]["partition"], "seconds": round(time.time() - started, 1)}
    if len(runs) > 1:
        result["pretrained"]["federations"] = [run["pretrained"]["wall_seconds"] for run in runs]
        result["partitions"] = [run["partition"] for run in runs]
    return result, tsne_panels(name, best_tradeoff(points))


# ------------------------------------------------------------------------------------ over federations
Z95 = 1.96


def audit_variance(figure: dict, n: int) -> float:
    """The variance of one federation's figure as the audit's interval counts it (sdk/audit.py interval): the
    spread of its runs (attacker seeds) over their number, plus the binomial variance over its n test rows."""
    runs = np.asarray(figure.get("runs") or [figure["mean"]], dtype=np.float64)
    mean = float(runs.mean())
    spread = float(runs.var(ddof=1)) / len(runs) if len(runs) > 1 else 0.0
    return spread + mean * (1 - mean) / max(int(n), 1)


def over_federations(figures: list[dict], ns: list[int]) -> dict:
    """The mean over F federations of one figure, with its 95% interval: half-width
    sqrt((t_{0.975, F-1} * s / sqrt(F))^2 + 1.96^2 * sum_i(v_i) / F^2), s the standard deviation of the F
    federations' means (the federation-to-federation spread, Student's t for F - 1 degrees of freedom) and v_i
    federation i's audit variance (audit_variance: its attacker seeds' spread and its test rows' binomial error),
    so the interval is a t-interval over the federations' means widened by the error of the mean of F audits.
    The second term is counted again although s already holds it: the interval errs wide, and with few
    federations s alone can come out near 0 by chance. Clipped to [0, 1]. One federation: its figure as it is
    (the audit's own interval)."""
    if len(figures) == 1:
        return figures[0]
    from scipy.stats import t as student
    means = np.asarray([figure["mean"] for figure in figures], dtype=np.float64)
    count, mean = len(means), float(means.mean())
    between = float(student.ppf(0.975, count - 1)) * float(means.std(ddof=1)) / math.sqrt(count)
    within = Z95 * math.sqrt(sum(audit_variance(figure, n) for figure, n in zip(figures, ns))) / count
    half = math.sqrt(between ** 2 + within ** 2)
    return {"mean": mean, "low": max(0.0, mean - half), "high": min(1.0, mean + half),
            "runs": [float(value) for value in means], "federations": count, "between_half": between,
            "within_half": within}


def audited_over_federations(points: list[dict]) -> dict:
    """The audit's figures of one release (or of the raw rows) over federations: each family and the utility
    probe by over_federations, the strongest family the one of highest mean over federations (the audit's own
    rule), Random* the federations' mean."""
    ns = [p["n_test"] for p in points]
    private = {family: over_federations([p["private"][family] for p in points], ns) for family in points[0]["private"]}
    strongest = max(private, key=lambda family: private[family]["mean"])
    return {"private": private, "strongest_attacker": strongest, "strongest": private[strongest],
            "utility": over_federations([p["utility"] for p in points], ns),
            "random_star": float(np.mean([p["random_star"] for p in points])),
            "random_star_runs": [p["random_star"] for p in points], "n_train": points[0]["n_train"],
            "n_test": points[0]["n_test"]}


def raw_over_federations(raws: list[dict]) -> dict:
    """The raw-data rows over federations (each its own split); power judged on the means, as the goal is."""
    if len(raws) == 1:
        return raws[0]
    raw = audited_over_federations(raws)
    raw["has_power"] = raw["strongest"]["mean"] > raw["random_star"] + GOAL_MARGIN
    raw["federations"] = [{"seed": seed, **figures} for seed, figures in enumerate(raws)]
    return raw


def paper_over_federations(papers: list[dict]) -> dict:
    """The paper's measure over federations: over_federations of each federation's binomial figure; at chance
    when that interval reaches 1/K, as for one federation."""
    if any(paper.get("accuracy") is None for paper in papers):
        return {"accuracy": None}
    figure = over_federations([paper["accuracy"] for paper in papers], [paper["heldout_rows"] for paper in papers])
    chance = papers[0]["chance"]
    return {"accuracy": figure, "devices": [paper["devices"] for paper in papers],
            "heldout_rows": [paper["heldout_rows"] for paper in papers], "chance": chance,
            "at_chance": figure["low"] <= chance}


def devices_over_federations(devices: list[dict]) -> dict:
    """Figure 2's figures over federations: each the federations' mean (None where one has none), and their
    values; the updates averaged a round, the mean; the updates dropped, the sum."""
    def mean(key: str):
        values = [entry.get(key) for entry in devices]
        return None if any(value is None for value in values) else float(np.mean(values))
    merged = {key: mean(key) for key in ("ce", "ce_over_ln_k", "jsd", "vclub", "neg_ce")}
    return {**merged, "ce_over_ln_k_runs": [entry.get("ce_over_ln_k") for entry in devices],
            "updates_per_round": float(np.mean([entry["updates_per_round"] for entry in devices])),
            "dropped": int(sum(entry["dropped"] for entry in devices))}


def straddles(figure: dict, threshold: float) -> bool:
    return figure["low"] <= threshold <= figure["high"]


def release_over_federations(points: list[dict], raw: dict, reference: dict) -> dict:
    """One release over its federations: the audit's figures, the paper's measure and the devices' losses by the
    functions above, the goal on those means (goal(), as for one federation) and, per part, whether the interval
    reaches across the part's threshold (the verdict then rests on the mean alone); every federation's own
    figures and goal against its own raw rows in "federations". One federation: its point as it is."""
    if len(points) == 1:
        return points[0]
    first = points[0]
    point = audited_over_federations(points)
    point.update(lam=first["lam"], term=first["term"], run=first["run"], bundle=first["bundle"],
                 runs=[p["run"] for p in points], wall_seconds=float(sum(p["wall_seconds"] for p in points)),
                 paper=paper_over_federations([p["paper"] for p in points]),
                 devices=devices_over_federations([p["devices"] for p in points]))
    point["goal"] = goal(point, raw)
    point["goal"]["straddles"] = {
        "privacy": straddles(point["strongest"], point["random_star"] + GOAL_MARGIN),
        "utility": straddles(point["utility"], raw["utility"]["mean"] - UTILITY_MARGIN)}
    point["deployed"] = compatible(point, reference)
    point["deployed"]["figures"] = "means over the federations of the audit's means"
    point["federations"] = [{"seed": seed, **p} for seed, p in enumerate(points)]
    progress(f"lambda {point['lam']:g} ({point['term']}) over {len(points)} federations: strongest "
             f"{point['strongest_attacker']} {cell(point['strongest'])}, utility {cell(point['utility'])}, goal "
             f"{point['goal']['verdict']}")
    return point


def best_tradeoff(points: list[dict]) -> dict:
    """The t-SNE's release: the best utility minus the strongest attacker."""
    return max(points, key=lambda p: p["utility"]["mean"] - p["strongest"]["mean"])


def tsne_panels(name: str, point: dict) -> dict:
    """2-D t-SNE of raw test rows and of their representations (the bundle's output), by private value."""
    from sklearn.manifold import TSNE

    from sensorveil.runtime import Privatizer
    mechanism = mechanisms.get("tappfl")
    run = read_run(point["run"])
    task, _ = mechanism.task(point["run"], run)
    rows = task.test[:TSNE_ROWS]
    release = mechanism.release(point["run"], run, Privatizer.load(point["bundle"], backend="onnxruntime"))
    perplexity = min(30.0, (len(rows) - 1) / 3)
    embed = lambda x: TSNE(n_components=2, init="pca", random_state=0, perplexity=perplexity).fit_transform(x)  # noqa: E731
    return {"raw": embed(task.x[rows].flatten(1).numpy()), "learnt": embed(release.task.x[rows].numpy()),
            "private": np.asarray(task.private[rows]), "lam": point["lam"], "term": point["term"]}


# ---------------------------------------------------------------------------------------------- the page
def intro(results: dict) -> list[str]:
    s = results["settings"]
    return [
        f"Flower {results['flower']}, simulation runtime. Each dataset's devices and rho are in its section; "
        f"{s['pretrain_rounds']} pre-training rounds (the utility term alone), then {s['rounds']} TAPPFL rounds "
        f"from that f for every lambda; {s['local_epochs']} local epochs, batch 10, SGD lr 0.01; IID partition, "
        f"each device holding 20% of its rows out. Participation *{s['participation']}*: "
        + ("the rho M devices sampled a round run DeviceUpdate and all of them are averaged (the setup's \"the "
           "server randomly selects 10% devices and uses FedAvg\"), not Algorithm 1's every device every round, "
           "which trains 10 times as many and did not fit this run's budget; a device's g trains only in the "
           "rounds it is sampled" if s["participation"] == "sampled" else
           "every device runs DeviceUpdate every round and the server averages rho M of the updates (Algorithm 1)")
        + ". No update filter (the paper averages every update it collects).",
        "",
        "**The two privacy terms**, both run: *vCLUB, eq. 2*: f minimises the variational upper bound "
        "I_vCLUB(r; u) = E_p(r,u)[log q(u|r)] - E_p(r)p(u)[log q(u|r)] with g = q trained by eq. 3; *CE, eq. 4/7*: "
        "f maximises g's cross-entropy, the bound's first term alone (eq. 4's min-max and eq. 7's objective, as "
        "\"Implementation in practice\" and the authors' code train it). At lambda 0 the term has weight 0 and "
        "the two are one run (*both*). The utility term is the JSD estimate of eq. 5-6 in both.",
        "",
        f"**Attackers**: the audit every mechanism's page uses (sensorveil/sdk/audit.py) on what each lambda's "
        f"ONNX bundle emits, as a device computes it: families {', '.join(FAMILIES)} (*trees+useful*: trees "
        f"given the useful label too), each trained on the released training rows with the true private labels "
        f"and scored on the released test rows, over {s['seeds']} seeds, mean and 95% interval (seed spread and "
        "the test rows' binomial error); each section says over how many trained federations. The exact "
        "posterior does not "
        "apply: TAPPFL releases a representation, not a bank index; nor does *re-id* (a network trained on raw rows "
        "meeting a release in the raw rows' shape). *Utility*: the audit's neural probe of the "
        f"useful attribute. *Raw data*: the same audit on the raw rows (no mechanism). Attackers train "
        f"{s['attacker_epochs']} epochs. *Random\\**: the best guess of the private attribute from the useful "
        "label alone (P(private | useful) from the training rows), the floor an adversary who sees the useful "
        "label starts from; it is not the majority-class rate. *Chance*: 1/K, Table 2's random guess.",
        "",
        "**The paper's measure** (Table 2's inference accuracy): each device's own privacy network g on f's "
        "representation of its held-out rows, pooled over the devices evaluated in the last round, with a "
        "binomial 95% interval over those rows. *At chance* when that interval reaches 1/K. *Devices' CE / ln K*: "
        "g's cross-entropy in the last round over ln K, the CE of a g that reads nothing of r (balanced classes).",
        "",
        f"**Goal** of a release: *privacy*, the strongest family within {GOAL_MARGIN * 100:g} points of Random*; "
        f"*utility*, the utility probe at most {UTILITY_MARGIN * 100:g} points under the raw data's; *power*, "
        "raw data's strongest family more than 5 points above Random* (else no release could show protection). "
        "*met* only when all three hold.",
        "",
    ]


def settings_line(data: dict) -> str:
    partition, per_round = data.get("partition", {}), [p["devices"]["updates_per_round"] for p in all_points(data)]
    small = ("" if data["dataset"] != "digits" else " Digits' 1,198 training rows are too few for 100 devices "
             "(12 rows each): 4 devices of the paper's ~300 rows, rho 0.5 (rho 0.1 would average max(1, "
             "round(0.4)) = 1 update a round, one device's f).")
    return (f"{data['clients']} devices of {partition.get('rows_median', '?')} rows (median), "
            f"{partition.get('heldout', {}).get('rows', '?')} held out in all; rho {data['fraction']:g}: "
            f"{spread(per_round)} updates averaged a round (measured).{small}")


def spread(values: list) -> str:
    return f"{min(values):g}" if min(values) == max(values) else f"{min(values):g} to {max(values):g}"


def all_points(data: dict) -> list[dict]:
    seen, points = set(), []
    for term_points in data["terms"].values():
        for point in term_points:
            if point["run"] not in seen:
                seen.add(point["run"])
                points.append(point)
    return points


def row(name: str, term: str, lam: str, audited: dict, paper: str, ce: str, parts: tuple) -> str:
    return (f"| {name} | {term} | {lam} | {audited['strongest_attacker']}: {fed_cell(audited['strongest'])} | "
            f"{families_text(audited['private'])} | {fed_cell(audited['utility'])} | {paper} | {ce} | "
            + " | ".join(parts) + " |")


def fed_cell(figure: dict) -> str:
    """A figure's cell; over federations, each federation's mean after it."""
    if not figure.get("federations"):
        return cell(figure)
    return cell(figure) + " (per federation " + ", ".join(f"{100 * value:.1f}" for value in figure["runs"]) + ")"


def part_text(holds: bool, goal: dict, part: str) -> str:
    return ("within" if holds else "NOT within") + (" (straddles)" if goal.get("straddles", {}).get(part) else "")


def federations_text(data: dict) -> str:
    """Over how many trained federations the section's figures are, and how their intervals are formed."""
    count = data.get("federation_seeds", 1)
    if count == 1:
        return ("**One trained federation per release** (federation seed 0): the intervals are the audit's (its "
                "attacker seeds and the test rows' binomial error); the spread from training the federation again "
                "is not in them.")
    t = student_t(count)
    return (f"**{count} trained federations per release**, seeds 0 to {count - 1}, each the whole pipeline again: "
            "the seed draws the split of the rows (devices', attackers' and test rows), the partition and held-out "
            "rows, f's initialisation and pre-training, the devices' networks and batches and the devices sampled "
            "each round, so each federation has its own pre-training and its own raw-data audit. Every figure is "
            "the mean over the federations (each federation's mean after it); its 95% interval has half-width "
            "sqrt((t s / sqrt(F))^2 + 1.96^2 (v_1 + ... + v_F) / F^2), with F the federations, s the standard "
            f"deviation of their means, t Student's 97.5% quantile for F - 1 degrees of freedom ({t:.2f} for "
            f"F = {count}), and v_i federation i's audit variance (its attacker seeds' spread over their number "
            "plus the binomial variance of its test rows, what the audit's own interval is made of): a t-interval "
            "over the federations' means widened by the error of the mean of the F audits. It errs wide (s already "
            "holds part of that error), and it does not shrink to nothing when F federations agree by chance. The "
            "strongest family is the one of highest mean over federations; Random* and the raw-data row are the "
            "federations' means; the paper's measure is combined the same way from each federation's binomial "
            "interval. The goal's parts compare these means, as for one federation; *(straddles)* marks a part "
            "whose interval reaches across its threshold, where the verdict rests on the mean alone. Every "
            "federation's own figures and goal are in tappfl_results.json.")


def student_t(count: int) -> float:
    from scipy.stats import t as student
    return float(student.ppf(0.975, count - 1))


def origin_text(data: dict, results: dict) -> str:
    """Where a section comes from, when it is not the page header's run (a dataset kept from an earlier run)."""
    origin, top = data.get("provenance"), recorded(results)
    if not isinstance(origin, dict) or (origin.get("command"), origin.get("commit")) == (top.get("command"),
                                                                                         top.get("commit")):
        return ""
    settings, now = data.get("settings") or {}, results.get("settings") or {}
    differ = [f"{key} {settings[key]}" for key in sorted(settings) if key in now and settings[key] != now[key]
              and key not in ("lambdas", "privacy_terms", "federation_seeds")]
    return (f"This section comes from an earlier run, kept when the page was written again: "
            f"{page_header(origin).removesuffix(' Do not edit by hand: rerun the command.')}"
            + (f" Its settings that differ from the header's: {', '.join(differ)}." if differ else
               " Its training and audit settings are the header's."))


def dataset_section(data: dict, results: dict | None = None) -> list[str]:
    raw, ref = data["raw"], data["reference"]
    origin = origin_text(data, results or {})
    stars = ("" if not raw.get("random_star_runs") else
             " (per federation " + ", ".join(f"{100 * value:.1f}" for value in raw["random_star_runs"]) + ")")
    lines = [f"## {data['dataset']} (private {data['private']}, {ref['n_private']} values; useful {data['useful']})",
             "", *([origin, ""] if origin else []), settings_line(data), "", federations_text(data), "",
             f"Random* {pct(raw['random_star'])}{stars}; chance 1/K {pct(ref['random_guess_private'])}; "
             f"{raw['n_train']} training / {raw['n_test']} test rows for the attackers.", "",
             "| release | privacy term | lambda | strongest attacker [95%] | every family (mean) | utility [95%] | "
             "paper's measure: devices' g [95%] | devices' CE / ln K | privacy | utility | power | goal |",
             "|---|---|---:|---|---|---|---|---:|---|---|---|---|",
             row("raw data (no mechanism)", "-", "-", raw, "-", "-",
                 ("within" if raw["strongest"]["mean"] <= raw["random_star"] + GOAL_MARGIN else "NOT within",
                  "reference", "yes" if raw["has_power"] else "no", "-"))]
    for p in all_points(data):
        paper, g = p["paper"], p["goal"]
        measure = "-" if paper.get("accuracy") is None else (fed_cell(paper["accuracy"])
                                                             + (" (chance)" if paper["at_chance"] else ""))
        ce = "-" if p["devices"]["ce_over_ln_k"] is None else f"{p['devices']['ce_over_ln_k']:.2f}"
        lines.append(row("TAPPFL", TERMS.get(p["term"], p["term"]), f"{p['lam']:g}", p, measure, ce,
                         (part_text(g["privacy"], g, "privacy"), part_text(g["utility"], g, "utility"),
                          "yes" if g["power"] else "no", g["verdict"])))
    return lines + ["", chance_text(data), "", finding(data), ""]


def chance_text(data: dict) -> str:
    """Where the paper's measure sits at chance, and what the audit's strongest family reads there."""
    points = [p for p in all_points(data) if p["paper"].get("accuracy") is not None]
    at = [p for p in points if p["paper"]["at_chance"]]
    if not points:
        return "**The paper's measure** was not recorded (no TAPPFL round evaluated)."
    if not at:
        return "**The paper's measure** sits above chance at every lambda."
    named = "; ".join(f"lambda {p['lam']:g} ({TERMS.get(p['term'], p['term'])}): devices' g "
                      f"{pct(p['paper']['accuracy']['mean'])} against chance {pct(p['paper']['chance'])}, while "
                      f"{p['strongest_attacker']} reads {pct(p['strongest']['mean'])} (Random* "
                      f"{pct(p['random_star'])})" for p in at)
    every = " at every lambda, lambda 0 included:" if len(at) == len(points) else ":"
    return (f"**Where the paper's measure sits at chance**{every} {named}. There it says only that the devices' "
            "g learnt nothing; the audit's attackers, trained afresh on the released representations, are the "
            "measure of what the release leaks.")


def finding(data: dict) -> str:
    points = all_points(data)
    met = [p for p in points if p["goal"]["verdict"] == "met"]
    best = min(points, key=lambda p: p["strongest"]["mean"])
    table2 = PAPER_TABLE2.get(data["dataset"])
    context = ("" if not table2 else f" Table 2's nearest row ({table2[0]}) reads "
               + ", ".join(f"{pct(v)} at lambda {k:g}" for k, v in sorted(table2[1].items()))
               + " with its own g, for context.")
    names = ", ".join(f"lambda {p['lam']:g} ({p['term']})" for p in met)
    verdict = f"the goal is met at {names}" if met else "the goal is met at no lambda"
    return (f"**Finding.** The lowest strongest attacker is {mean_text(best['strongest'])} "
            f"({best['strongest_attacker']}, lambda {best['lam']:g}, {TERMS.get(best['term'], best['term'])}), "
            f"against Random* {pct(best['random_star'])} and {pct(data['raw']['strongest']['mean'])} on raw data, "
            f"utility {mean_text(best['utility'])} (raw {mean_text(data['raw']['utility'])}); {verdict}."
            + context)


def mean_text(figure: dict) -> str:
    """A mean in percent; over federations, with its interval ("over federations")."""
    if not figure.get("federations"):
        return pct(figure["mean"])
    return (f"{pct(figure['mean'])} [{pct(figure['low'])}, {pct(figure['high'])}] over {figure['federations']} "
            "federations")


def markdown(results: dict) -> str:
    lines = ["# TAPPFL at the paper's scale: the shared audit, both privacy terms, the paper's measure beside it", "",
             page_header(recorded(results)), ""] + intro(results)
    for data in results["datasets"]:
        lines += dataset_section(data, results)
    lines += ["![strongest attacker and utility by lambda, both privacy terms; Figure 2's losses](tappfl_results.png)",
              "", "![t-SNE of raw and learnt representations, coloured by the private attribute](tappfl_tsne.png)", ""]
    shown = results.get("tsne")
    if shown is not None:
        named = "; ".join(f"{entry['dataset']}: lambda {entry['lam']:g}, {TERMS.get(entry['term'], entry['term'])}, "
                          f"federation seed 0" for entry in shown)
        missing = [data["dataset"] for data in results["datasets"] if data["dataset"] not in
                   {entry["dataset"] for entry in shown}]
        lines[-1:] = [f"The t-SNE shows {named} (the release of best utility minus strongest attacker)."
                      + ("" if not missing else f" Not shown: {', '.join(missing)}, kept from an earlier run whose "
                         "release folders are not on the machine that wrote the page; its t-SNE is in the "
                         "tappfl_tsne.png of the commit its section names."), ""]
    return "\n".join(lines)


def plot(results: dict, panels: dict, docs: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results["datasets"])
    fig, axes = plt.subplots(2, n, figsize=(6 * n, 8), squeeze=False)
    for col, data in enumerate(results["datasets"]):
        top, bottom = axes[0][col], axes[1][col]
        for index, (term, points) in enumerate(data["terms"].items()):
            lams, label = [p["lam"] for p in points], TERMS.get(term, term)
            for key, marker, what in (("strongest", "s", "strongest attacker"), ("utility", "o", "utility probe")):
                figures = [p[key] for p in points]
                top.errorbar(lams, [f["mean"] for f in figures], yerr=[[f["mean"] - f["low"] for f in figures],
                                                                       [f["high"] - f["mean"] for f in figures]],
                             marker=marker, capsize=3, color=f"C{2 * index + (key == 'utility')}",
                             label=f"{what}, {label}")
            paper = [p["paper"].get("accuracy") for p in points]
            if all(paper):
                top.plot(lams, [f["mean"] for f in paper], "^:", color=f"C{4 + index}",
                         label=f"paper's measure (devices' g), {label}")
            bottom.plot(lams, [p["devices"]["ce_over_ln_k"] for p in points], "o-",
                        label=f"devices' CE / ln K, {label}")
            bottom.plot(lams, [p["devices"]["jsd"] for p in points], "s--", label=f"devices' JSD estimate, {label}")
        top.axhline(data["raw"]["random_star"], color="grey", ls="--", label="Random*")
        top.axhline(data["reference"]["random_guess_private"], color="grey", ls=":", label="chance 1/K")
        top.axhline(data["raw"]["strongest"]["mean"], color="black", ls="-.", lw=0.8, label="raw data, strongest")
        top.set(title=f"{data['dataset']}: the audit (95% intervals)", xlabel="lambda", ylabel="accuracy",
                ylim=(0, 1.02))
        top.legend(fontsize=6)
        bottom.set(title=f"{data['dataset']}: Figure 2 (devices' last round)", xlabel="lambda")
        bottom.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(docs / "tappfl_results.png", dpi=110)
    plt.close(fig)
    plot_tsne(panels, docs)


def plot_tsne(panels: dict, docs: Path) -> None:
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 4.6 * len(panels)), squeeze=False)
    for row_index, (name, panel) in enumerate(panels.items()):
        for col, key in enumerate(("raw", "learnt")):
            ax = axes[row_index][col]
            scatter = ax.scatter(panel[key][:, 0], panel[key][:, 1], c=panel["private"], s=5, cmap="tab10")
            title = ("raw input" if key == "raw" else
                     f"TAPPFL representation (lambda {panel['lam']:g}, {TERMS.get(panel['term'], panel['term'])})")
            ax.set(title=f"{name}: {title}", xticks=[], yticks=[])
        if len(np.unique(panel["private"])) <= 10:
            axes[row_index][1].legend(*scatter.legend_elements(), title="private", fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(docs / "tappfl_tsne.png", dpi=110)
    plt.close(fig)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(SHARED / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--privacy-terms", nargs="+", default=list(TERMS), choices=list(TERMS),
                        help="vclub: eq. 2's I_vCLUB; ce: eq. 4/7's cross-entropy form (config privacy_bound)")
    parser.add_argument("--clients", type=int, default=0, help="devices for every dataset; 0: DATASETS' own")
    parser.add_argument("--fraction", type=float, default=0.0, help="rho for every dataset; 0: DATASETS' own")
    parser.add_argument("--participation", default="sampled", choices=["sampled", "all"],
                        help="sampled: the rho M sampled devices train; all: Algorithm 1, every device every round")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pretrain-rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=10)
    parser.add_argument("--evaluate-every", type=int, default=0, help="rounds between the devices' evaluations; "
                        "0: the last round only (the paper's measure is the end of training's)")
    parser.add_argument("--seeds", type=int, default=3, help="the audit's seeds")
    parser.add_argument("--federation-seeds", type=int, default=1,
                        help="federations per release, seeds 0..N-1, each the whole pipeline (split, pre-training, "
                        "raw audit, releases); the page gives the mean over them with an interval that holds their "
                        "spread (over_federations)")
    parser.add_argument("--attacker-epochs", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of each federation")
    parser.add_argument("--out", default=str(ROOT / "runs" / "tappfl-results"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite tappfl_results.md from the JSON of the last run (no training)")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    return parser.parse_args()


ORIGIN_KEYS = ("command", "timestamp", "flower", "settings", "goal")


def merged(results: dict, previous: dict | None) -> dict:
    """This run's results with the datasets of ``previous`` (the JSON already in --docs) that it did not run,
    in DATASETS' order. Every entry carries where it comes from (provenance, command, timestamp, Flower,
    settings, goal margins); an entry from a JSON written before entries did takes its file's."""
    def with_origin(data: dict, source: dict) -> dict:
        if isinstance(data.get("provenance"), dict):
            return data
        return {**data, "provenance": recorded(source), **{key: source.get(key) for key in ORIGIN_KEYS}}
    ran = [with_origin(data, results) for data in results["datasets"]]
    names = {data["dataset"] for data in ran}
    kept = [with_origin(data, previous) for data in (previous or {}).get("datasets", [])
            if data["dataset"] not in names]
    order = list(DATASETS) + sorted({data["dataset"] for data in kept} - set(DATASETS))
    entries = sorted(ran + kept, key=lambda data: order.index(data["dataset"]))
    return {**results, "datasets": entries}


def kept_panels(results: dict, panels: dict) -> dict:
    """The t-SNE panels of kept datasets whose release (run and bundle folders) is still on this machine."""
    found = {}
    for data in results["datasets"]:
        if data["dataset"] in panels:
            continue
        point = best_tradeoff(all_points(data))
        here = {key: ROOT / point[key] for key in ("run", "bundle")}
        if all(path.is_dir() for path in here.values()):
            found[data["dataset"]] = tsne_panels(data["dataset"], {**point, **{k: str(v) for k, v in here.items()}})
    return found


def main() -> None:
    args = arguments()
    out, docs = Path(args.out), Path(args.docs)
    if args.render_only:
        (docs / "tappfl_results.md").write_text(markdown(json.loads((docs / "tappfl_results.json").read_text())))
        return
    require_clean(args.allow_dirty)
    # the attackers and probes are small networks on batches of 64: one torch thread each runs them fastest, and
    # with more threads than free cores (a busy 2-core machine) an epoch took 10 times as long
    torch.set_num_threads(1)
    record = provenance(allow_dirty=args.allow_dirty)   # the commit and date the run starts from
    out.mkdir(parents=True, exist_ok=True)
    settings = {key: getattr(args, key) for key in ("rounds", "pretrain_rounds", "local_epochs", "participation",
                                                    "seeds", "attacker_epochs", "lambdas", "privacy_terms",
                                                    "federation_seeds")}
    results = {"command": "python scripts/tappfl_results.py " + " ".join(sys.argv[1:]),
               "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "flower": flower_version(),
               "settings": {**settings, "evaluate_every": args.evaluate_every or args.rounds},
               "goal": {"privacy_margin": GOAL_MARGIN, "utility_margin": UTILITY_MARGIN}, "datasets": []}
    panels = {}
    for name in args.datasets:
        result, panels[name] = run_dataset(name, args, out)
        results["datasets"].append(result)
        progress(f"{name} done in {result['seconds']:.0f} s")
    results["provenance"] = record
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / "tappfl_results.json"
    results = merged(portable(results, shared=SHARED), json.loads(path.read_text()) if path.is_file() else None)
    panels.update(kept_panels(results, panels))
    results["tsne"] = [{"dataset": name, "lam": panel["lam"], "term": panel["term"]} for name, panel in panels.items()]
    path.write_text(json.dumps(results, indent=2, default=float) + "\n")
    (docs / "tappfl_results.md").write_text(markdown(results))
    plot(results, panels, docs)
    print(f"wrote {docs / 'tappfl_results.md'}")


if __name__ == "__main__":
    main()
