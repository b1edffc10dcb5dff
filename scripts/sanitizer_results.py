#!/usr/bin/env python
"""Sanitizer's four mechanisms (section 3.1) on one trained alpha-beta-VAE per dataset, under the audit every
mechanism's page uses (sensorveil.sdk.audit): the attacker families (neural, trees, logistic, trees with the
useful label, and the re-identification attacker trained on raw data), 3 seeds, 95% intervals, the same
families and the utility probe on the RAW data as rows of their own, and the paper's measures (normalized
hyper-volume, Table 1; CAS, Table 2). Written to docs/sanitizer_results.{json,md,png}; every figure on that
page comes from this script:

    python scripts/sanitizer_results.py --datasets digits ujiindoorloc --attacker-epochs 5 --uji-rows 6000

beta (eq. 1, above 1) and the alphas (eq. 5) are chosen by the mechanism's training on a validation split of
the training rows (sensorveil/sdk/mechanisms/sanitizer_parts/choice.py); the page reports the grid and the
choice. Each mechanism then runs on that encoder and decoder at a few settings of its knob (obfuscation:
epsilon; generalization: clusters; sampling: mixture components), released from a draw of q_phi(z|x) as
section 3.1 and the bundle do; the mixture and the centroids are fitted on such draws.

Goal of a row: privacy, the strongest attacker within 5 points of Random* (the audit's goal), AND utility, the
utility probe within UTILITY_MARGIN of the same probe on raw data. "met" only when both hold and the audit has
power (raw data itself misses the privacy goal); the exact-posterior attacker does not apply (Sanitizer
releases samples, not a bank index).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

from sensorveil.sdk import mechanisms
from sensorveil.sdk.audit import GOAL_MARGIN, Release, audit
from sensorveil.sdk.mechanisms.sanitizer import (
    apply_release,
    cas,
    fit_parameters,
    make_release,
    normalized_hypervolume,
    private_cas,
)
from sensorveil.sdk.runs import read_run, train_run
from sensorveil.sdk.training import sensor_step
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASETS = {"digits": {"useful": "parity", "private": "lt5", "uji": False},
            "ujiindoorloc": {"useful": "floor", "private": "region", "uji": True},
            "synthetic-depth": {"useful": "facing", "private": "identity", "uji": False}}
SWEEPS = {"suppression": [{}], "obfuscation": [{"epsilon": e} for e in (0.5, 8.0)],
          "generalization": [{"clusters": 8}], "sampling": [{"components": c} for c in (1, 8)]}
SEEDS = 3
UTILITY_MARGIN = 0.05     # the utility probe on the release at most 5 points under the same probe on raw data
# The paper's own figures (Sanitizer row), on face datasets this project does not have (UTKFace, CelebA, FairFace):
# Table 1, normalized hyper-volume; Table 2, CAS (utility attribute / sensitive attribute, trained on sanitized).
PAPER_HV = {"UTKFace": 0.476, "CelebA": 0.483, "FairFace": 0.476}
PAPER_CAS = {"UTKFace": (0.86, 0.474), "CelebA": (0.9022, 0.6955)}


def run_dataset(name: str, uji_path: str, epochs: int, out: Path, rows: int | None = None) -> dict:
    spec = DATASETS[name]
    started = time.time()
    options = {"max_rows": rows} if rows and spec["uji"] else None
    run_dir = train_run("sanitizer", name, data_path=uji_path if spec["uji"] else None, useful=spec["useful"],
                        private=spec["private"], out=out / f"sanitizer-{name}", attacker_epochs=epochs,
                        dataset_options=options)
    run = read_run(run_dir)
    mechanism = mechanisms.get("sanitizer")
    config, nets, _ = mechanism.load_all(run_dir, run)
    task, _ = mechanism.task(run_dir, run)
    raw = summary(audit(Release(task, task.x[task.attacker_train], task.x[task.test]), seeds=SEEDS,
                        attacker_epochs=epochs))
    print(f"{name} raw data: strongest {raw['strongest']['mean']:.3f}, utility {raw['utility']['mean']:.3f}")
    step, curves = sensor_step(run["output"]), {}
    for kind, settings in SWEEPS.items():
        points = [measure(task, nets, replace(config, mechanism=kind, **setting), step, epochs, raw)
                  | {"setting": setting} for setting in settings]
        curves[kind] = {"points": points, "hypervolume": normalized_hypervolume(
            [(p["strongest"]["mean"], p["utility"]["mean"]) for p in points])}
    return {"dataset": name, "useful": spec["useful"], "private": spec["private"], "config": run["config"],
            "choice": run["choice"], "random_star": raw["random_star"], "raw": raw,
            "n_train": int(len(task.attacker_train)), "n_test": int(len(task.test)), "curves": curves,
            "seconds": round(time.time() - started, 1)}


def summary(result: dict) -> dict:
    """What the page keeps of one audit: every family's interval, the strongest, utility, Random*, power."""
    strongest = result["strongest_attacker"]
    return {"private": result["private"], "strongest_attacker": strongest, "strongest": result["private"][strongest],
            "utility": result["useful"], "random_star": result["random_star"],
            "privacy_goal": result["goal"]["strongest_within_5_points_of_random_star"],
            "has_power": result["power"]["has_power"], "raw_private_one_seed": result["raw_private"]}


def measure(task, nets: dict, config, step: float, epochs: int, raw: dict) -> dict:
    """One mechanism at one setting: its parameters fitted on draws of the training rows' z_S, the audit of its
    release, CAS (useful: true labels; private: y~_S = g_u(z~_S)) and the goal's parts."""
    params = fit_parameters(nets["encoder"], task.x[task.attacker_train], config)
    run = make_release(nets["encoder"], nets["decoder"], nets["aligner"], config.sensitive_dim, config.mechanism,
                       params, step, config.seed, config.release)
    train, relabelled = apply_release(run, task.x[task.attacker_train])
    test, _ = apply_release(run, task.x[task.test])
    point = summary(audit(Release(task, train, test), seeds=SEEDS, attacker_epochs=epochs))
    point["utility_goal"] = point["utility"]["mean"] >= raw["utility"]["mean"] - UTILITY_MARGIN
    point["goal"] = ("met" if point["privacy_goal"] and point["utility_goal"] and point["has_power"]
                     else "no power" if not point["has_power"] else "not met")
    point["cas_useful"] = cas(task, train, task.useful, task.n_useful, epochs, config.seed)
    point["cas_private"] = private_cas(task, train, relabelled, epochs, config.seed + 1)
    print(f"{config.mechanism}: strongest {point['strongest']['mean']:.3f}, utility {point['utility']['mean']:.3f}, "
          f"goal {point['goal']}")
    return point


def interval(figure: dict) -> str:
    return f"{figure['mean']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def families_text(private: dict) -> str:
    return "; ".join(f"{name} {figure['mean']:.3f}" for name, figure in private.items())


def choice_lines(data: dict) -> list:
    choice, chosen = data["choice"], data["choice"]["chosen"]
    lines = [f"beta and the alphas chosen on {choice['validation_rows']} validation rows carved from the "
             f"{choice['fitting_rows'] + choice['validation_rows']} training rows (the test rows are not read), by "
             f"the {choice['criterion']}; alpha1 {choice['alpha1']}. Chosen: beta {chosen['beta']:g}, alpha2 "
             f"{chosen['alpha2']:g}, alpha3 {chosen['alpha3']:g}, alpha4 {chosen['alpha4']:g}.", "",
             "| beta | alpha2 | alpha3 | alpha4 | validation leakage | validation utility | validation HV | chosen |",
             "|---|---|---|---|---|---|---|---|"]
    for row in choice["grid"]:
        val = row["validation"] or {}
        figures = " | ".join(f"{val[key]:.3f}" if key in val else "-" for key in ("leakage", "utility", "score"))
        mark = "yes" if all(row[k] == chosen[k] for k in chosen) else ""
        lines.append(f"| {row['beta']:g} | {row['alpha2']:g} | {row['alpha3']:g} | {row['alpha4']:g} | {figures} "
                     f"| {mark} |")
    return lines + [""]


def dataset_lines(data: dict) -> list:
    raw = data["raw"]
    lines = [f"## {data['dataset']}: private {data['private']}, useful {data['useful']}", "",
             f"Random* = {data['random_star']:.3f}; {data['n_train']} training / {data['n_test']} test rows; latent "
             f"{data['config']['latent_dim']} (z_S: {data['config']['sensitive_dim']}), {data['config']['epochs']} "
             "epochs.", ""] + choice_lines(data)
    lines += ["| release | setting | strongest attacker [95%] | every family (mean) | utility [95%] | CAS useful | "
              "CAS private (y~_S) | HV | privacy | utility | goal |", "|---|---|---|---|---|---|---|---|---|---|---|",
              f"| raw data (no mechanism) | - | {raw['strongest_attacker']}: {interval(raw['strongest'])} | "
              f"{families_text(raw['private'])} | {interval(raw['utility'])} | - | - | - | "
              f"{'within' if raw['privacy_goal'] else 'NOT within'} | reference | - |"]
    for kind, curve in data["curves"].items():
        for p in curve["points"]:
            setting = ", ".join(f"{k} {v:g}" for k, v in p["setting"].items()) or "-"
            lines.append(f"| {kind} | {setting} | {p['strongest_attacker']}: {interval(p['strongest'])} | "
                         f"{families_text(p['private'])} | {interval(p['utility'])} | {p['cas_useful']:.3f} | "
                         f"{p['cas_private']:.3f} | {curve['hypervolume']:.3f} | "
                         f"{'within' if p['privacy_goal'] else 'NOT within'} | "
                         f"{'within' if p['utility_goal'] else 'NOT within'} | {p['goal']} |")
    return lines + [""]


def markdown(results: dict) -> str:
    lines = ["# Sanitizer: the audit of each mechanism, raw-data rows, hyper-volume and CAS", "",
             page_header(recorded(results)), "",
             "Every figure below comes from that run. *Attackers*: the audit every mechanism's page uses "
             "(sensorveil/sdk/audit.py): each family trained on the released training split with the true private "
             "labels and scored on the released test split, over "
             f"{results['seeds']} seeds, mean and 95% interval (seed spread and the test rows' binomial error); "
             "*re-id* is the neural family trained on RAW data and applied to the release (one seed). The exact "
             "posterior does not apply: Sanitizer releases samples, not a bank index. *Utility*: the audit's "
             "neural probe of the useful attribute. *Raw data*: the same audit with no mechanism. *CAS* (section "
             "4.3): trained on the released training rows, scored on raw test rows; useful with its true labels, "
             "private with y~_S = g_u(z~_S), the label section 3.1 d releases. *HV*: normalized hyper-volume "
             "(Table 1's measure) of the mechanism's (1 - strongest, utility) points. Attackers train "
             f"{results['attacker_epochs']} epochs.", "",
             f"**Goal** of a row: *privacy*, the strongest attacker within {GOAL_MARGIN * 100:g} points of Random*; "
             f"*utility*, the utility probe at most {UTILITY_MARGIN * 100:g} points under the raw data's. *met* only "
             "when both hold and the audit has power (raw data itself is not within the privacy goal); *no power* "
             "when raw data would meet the privacy goal too.", ""]
    for data in results["datasets"]:
        lines += dataset_lines(data)
    lines += ["![privacy-utility points](sanitizer_results.png)", ""] + paper_section(results)
    return "\n".join(lines)


def paper_section(results: dict) -> list:
    """The paper's measures beside ours: the same measures (HV, CAS), other data, so not a reproduction."""
    lines = ["## The paper's figures beside ours", "",
             "The paper measures on face images (UTKFace, CelebA, FairFace) that this project does not have, so "
             "no row below reproduces a paper figure; they share the measure. Ours: each dataset's best "
             "hyper-volume over the four mechanisms, and the CAS at that mechanism's first setting.", "",
             "| source | data | normalized HV (Table 1) | CAS useful / private (Table 2) |", "|---|---|---|---|"]
    for data, hv in PAPER_HV.items():
        cas_pair = PAPER_CAS.get(data)
        cas_text = f"{cas_pair[0]:.3f} / {cas_pair[1]:.3f}" if cas_pair else "-"
        lines.append(f"| paper (Sanitizer) | {data} | {hv:.3f} | {cas_text} |")
    for data in results["datasets"]:
        best = max(data["curves"], key=lambda kind: data["curves"][kind]["hypervolume"])
        point = data["curves"][best]["points"][0]
        lines.append(f"| this page ({best}) | {data['dataset']} | {data['curves'][best]['hypervolume']:.3f} | "
                     f"{point['cas_useful']:.3f} / {point['cas_private']:.3f} |")
    return lines + [""]


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results["datasets"]), figsize=(6 * len(results["datasets"]), 4.2), squeeze=False)
    for ax, data in zip(axes[0], results["datasets"]):
        for kind, curve in [("raw data", {"points": [data["raw"]]}), *data["curves"].items()]:
            points = curve["points"]
            ax.errorbar([p["strongest"]["mean"] for p in points], [p["utility"]["mean"] for p in points],
                        xerr=[[p["strongest"]["mean"] - p["strongest"]["low"] for p in points],
                              [p["strongest"]["high"] - p["strongest"]["mean"] for p in points]],
                        yerr=[[p["utility"]["mean"] - p["utility"]["low"] for p in points],
                              [p["utility"]["high"] - p["utility"]["mean"] for p in points]],
                        marker="o", capsize=3, linestyle="-" if len(points) > 1 else "none", label=kind)
        ax.axvline(data["random_star"], color="grey", linestyle="--", label="Random*")
        ax.set_xlabel(f"strongest attacker on {data['private']} (95% interval)")
        ax.set_ylabel(f"utility probe on {data['useful']} (95% interval)")
        ax.set_title(data["dataset"], fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(SHARED / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--uji-rows", type=int, default=None,
                        help="a stratified subset of UJIIndoorLoc's rows (default: all 21,048), for a shorter run")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--attacker-epochs", type=int, default=10)
    parser.add_argument("--out", default="runs/sanitizer-results")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the page and plot from docs/sanitizer_results.json (its run's header stays)")
    args = parser.parse_args()
    if args.render_only:
        render(json.loads((ROOT / "docs" / "sanitizer_results.json").read_text()))
        return
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)   # the commit and date the run starts from
    results = {"command": f"python scripts/sanitizer_results.py --datasets {' '.join(args.datasets)} "
                          f"--attacker-epochs {args.attacker_epochs}"
                          + (f" --uji-rows {args.uji_rows}" if args.uji_rows else ""),
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "attacker_epochs": args.attacker_epochs,
               "seeds": SEEDS, "utility_margin": UTILITY_MARGIN, "privacy_margin": GOAL_MARGIN,
               "datasets": [run_dataset(name, args.uji, args.attacker_epochs, Path(args.out), args.uji_rows)
                            for name in args.datasets],
               "provenance": record}
    results = portable(results, shared=SHARED)
    (ROOT / "docs" / "sanitizer_results.json").write_text(json.dumps(results, indent=2) + "\n")
    render(results)


def render(results: dict) -> None:
    docs = ROOT / "docs"
    (docs / "sanitizer_results.md").write_text(markdown(results))
    plot(results, docs / "sanitizer_results.png")
    print(f"wrote {docs / 'sanitizer_results.md'}")


if __name__ == "__main__":
    main()
