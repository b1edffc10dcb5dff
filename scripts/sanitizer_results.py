#!/usr/bin/env python
"""Sanitizer's four mechanisms (section 3.1) on one trained alpha-beta-VAE per dataset: leakage and utility
under attackers fine-tuned on the sanitized data (section 4.3, E1), the normalized hyper-volume of each
mechanism's privacy-utility curve, and CAS (train on sanitized, test on raw; E2 and E3). Written to
docs/sanitizer_results.{json,md,png}, on digits, UJIIndoorLoc and synthetic depth (its default size: 8 identities,
960 frames); every figure on that page comes from this script:

    python scripts/sanitizer_results.py [--uji ../shared/datasets/ujiindoorloc.zip] [--attacker-epochs 10]

Each mechanism sweeps its own knob (obfuscation: epsilon; generalization: clusters; sampling: mixture
components) over the same encoder and decoder, so the curves differ by the mechanism alone. Every point is
measured twice: released from a draw of q_phi(z|x), as section 3.1 and the bundle do, and from the posterior
mean, as bundles before the sampled release did.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from sensorveil.benchmarks.provenance import page_header, portable, provenance, recorded, require_clean
from sensorveil.sdk import mechanisms
from sensorveil.sdk.evaluation import apply_privatize, evaluate
from sensorveil.sdk.mechanisms.sanitizer import cas, make_privatize, mechanism_parameters, normalized_hypervolume
from sensorveil.sdk.runs import read_run, train_run
from sensorveil.sdk.training import sensor_step

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASETS = {"digits": {"useful": "parity", "private": "lt5", "uji": False},
            "ujiindoorloc": {"useful": "floor", "private": "region", "uji": True},
            "synthetic-depth": {"useful": "facing", "private": "identity", "uji": False}}
SWEEPS = {"suppression": [{}], "obfuscation": [{"epsilon": e} for e in (0.5, 2.0, 8.0, 32.0)],
          "generalization": [{"clusters": c} for c in (2, 8, 32)], "sampling": [{"components": c} for c in (1, 4, 16)]}
GOAL_MARGIN = 0.05
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
    config, encoder, decoder, _ = mechanism.load(run_dir, run)
    task, _ = mechanism.task(run_dir, run)
    with torch.no_grad():
        z_s = encoder(task.x[task.attacker_train])[0][:, :config.sensitive_dim].numpy().astype(np.float64)
    step, curves = sensor_step(run["output"]), {}
    for kind, settings in SWEEPS.items():
        points = []
        for setting in settings:
            variant = replace(config, mechanism=kind, **setting)
            params = mechanism_parameters(z_s, variant)
            privatize = make_privatize(encoder, decoder, config.sensitive_dim, kind, params, step, config.seed)
            figures = evaluate(task, privatize, None, attacker_epochs=epochs, seed=config.seed)
            released = apply_privatize(privatize, task.x[task.attacker_train])
            points.append({"setting": setting, "leakage": figures["probing_acc_private"],
                           "leakage_trees": figures["tree_acc_private"], "utility": figures["probing_acc_useful"],
                           "cas_useful": cas(task, released, task.useful, task.n_useful, epochs, config.seed),
                           "cas_private": cas(task, released, task.private, task.n_private, epochs, config.seed + 1),
                           "distortion_l2": figures["distortion_l2"],
                           "mean_release": mean_release(task, encoder, decoder, config, kind, params, step, epochs)})
            print(f"{name} {kind} {setting}: leakage {points[-1]['leakage']:.3f}, utility {points[-1]['utility']:.3f}"
                  f" (mean release: leakage {points[-1]['mean_release']['leakage']:.3f})")
        curves[kind] = {"points": points, "hypervolume": normalized_hypervolume(
            [(max(p["leakage"], p["leakage_trees"]), p["utility"]) for p in points]),
            "hypervolume_mean_release": normalized_hypervolume(
            [(max(p["mean_release"]["leakage"], p["mean_release"]["leakage_trees"]), p["mean_release"]["utility"])
             for p in points])}
    return {"dataset": name, "useful": spec["useful"], "private": spec["private"], "config": run["config"],
            "random_star": run["reference"]["random_star"], "n_train": int(len(task.attacker_train)),
            "n_test": int(len(task.test)), "curves": curves, "seconds": round(time.time() - started, 1)}


def mean_release(task, encoder, decoder, config, kind: str, params: dict, step: float, epochs: int) -> dict:
    """The same mechanism released from the posterior mean (bundles before the sampled release did this), for
    the page's comparison with the draw of q_phi(z|x) that section 3.1 releases."""
    privatize = make_privatize(encoder, decoder, config.sensitive_dim, kind, params, step, config.seed, release="mean")
    figures = evaluate(task, privatize, None, attacker_epochs=epochs, seed=config.seed)
    return {"leakage": figures["probing_acc_private"], "leakage_trees": figures["tree_acc_private"],
            "utility": figures["probing_acc_useful"]}


def markdown(results: dict) -> str:
    lines = ["# Sanitizer: leakage, utility, hyper-volume and CAS per mechanism", "",
             page_header(recorded(results)), "",
             "Every figure below comes from that run. "
             "*Leakage*: the strongest of two attackers (neural, trees) trained on the sanitized training split and "
             "scored on the sanitized test split (section 4.3's fine-tuned adversary); *utility*: a neural probe of "
             "the useful attribute on the same data; *CAS*: trained on sanitized data, tested on raw data (E2 for the "
             "useful attribute, E3 for the private one); *HV*: normalized hyper-volume of the mechanism's "
             f"(1 - leakage, utility) points. Attackers train {results['attacker_epochs']} epochs; one seed. "
             "*Mean release*: the same mechanism and knob, but z taken as the posterior mean instead of a draw of "
             "q_phi(z|x) (section 3.1 releases a draw; bundles before the sampled release used the mean).", ""]
    for data in results["datasets"]:
        lines += [f"## {data['dataset']}: private {data['private']}, useful {data['useful']}", "",
                  f"Random* = {data['random_star']:.3f}; {data['n_train']} training / {data['n_test']} test rows; "
                  f"latent {data['config']['latent_dim']} (z_S: {data['config']['sensitive_dim']}), "
                  f"{data['config']['epochs']} epochs.", "",
                  "| mechanism | setting | leakage (neural / trees) | utility | CAS useful | CAS private | HV | goal "
                  "| mean release: leakage (neural / trees) | mean release: utility | mean release: HV |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for kind, curve in data["curves"].items():
            for point in curve["points"]:
                strongest, mean = max(point["leakage"], point["leakage_trees"]), point["mean_release"]
                goal = "met" if strongest <= data["random_star"] + GOAL_MARGIN else "not met"
                setting = ", ".join(f"{k} {v:g}" for k, v in point["setting"].items()) or "-"
                lines.append(f"| {kind} | {setting} | {point['leakage']:.3f} / {point['leakage_trees']:.3f} | "
                             f"{point['utility']:.3f} | {point['cas_useful']:.3f} | {point['cas_private']:.3f} | "
                             f"{curve['hypervolume']:.3f} | {goal} | "
                             f"{mean['leakage']:.3f} / {mean['leakage_trees']:.3f} | "
                             f"{mean['utility']:.3f} | {curve['hypervolume_mean_release']:.3f} |")
        lines.append("")
    lines += ["![privacy-utility curves](sanitizer_results.png)", ""] + paper_section(results)
    return "\n".join(lines)


def paper_section(results: dict) -> list:
    """The paper's measures beside ours: the same measures (HV, CAS), other data, so not a reproduction."""
    lines = ["## The paper's figures beside ours", "",
             "The paper measures on face images (UTKFace, CelebA, FairFace) that this project does not have, so "
             "no row below reproduces a paper figure; they share the measure. Ours: each dataset's best "
             "hyper-volume over the four mechanisms, and the sampled release's CAS at that mechanism's first "
             "setting.", "",
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
        for kind, curve in data["curves"].items():
            points = curve["points"]
            line, = ax.plot([max(p["leakage"], p["leakage_trees"]) for p in points], [p["utility"] for p in points],
                            marker="o", label=f"{kind} (HV {curve['hypervolume']:.2f})")
            ax.plot([max(p["mean_release"]["leakage"], p["mean_release"]["leakage_trees"]) for p in points],
                    [p["mean_release"]["utility"] for p in points], marker="x", linestyle=":", color=line.get_color(),
                    label=f"{kind}, mean release (HV {curve['hypervolume_mean_release']:.2f})")
        ax.axvline(data["random_star"], color="grey", linestyle="--", label="Random*")
        ax.set_xlabel(f"leakage: attacker accuracy on {data['private']}")
        ax.set_ylabel(f"utility: probe accuracy on {data['useful']}")
        ax.set_title(data["dataset"], fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(ROOT.parent / "shared" / "datasets" / "ujiindoorloc.zip"))
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
