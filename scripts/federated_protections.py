#!/usr/bin/env python
"""What Flower's protections cost a federated release: TAPPFL on digits (private lt5, useful parity), trained
the same way without them, with SecAgg+, and with client-side differential privacy at several noise multipliers,
each release exported to ONNX and put through the audit every mechanism's page uses (sensorveil/sdk/audit.py),
beside the raw rows' audit and the (epsilon, delta) each DP run spent. Written to
docs/federated_protections.{json,md}; every figure on that page comes from this script:

    python scripts/federated_protections.py [--clients 10] [--rounds 8] [--noise 1 2 4] [--clipping-norm 1]

SecAgg+ hides each device's update from the server (it learns only the round's sum); it changes no figure of
the release by design, and the page shows whether that holds. DP bounds what the trained model reveals of any
one device's participation (epsilon, delta), not the private attribute of a row the release carries: the page
reads both, so nobody takes one for the other.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from sensorveil.export import export_run
from sensorveil.sdk import mechanisms
from sensorveil.sdk.audit import FAMILIES, GOAL_MARGIN, REID, REID_OMNI, Release, audit
from sensorveil.sdk.mechanisms.tappfl import flower_version
from sensorveil.sdk.runs import read_run, train_run
from sensorveil_lab.page_text import cell
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASET = {"name": "digits", "useful": "parity", "private": "lt5"}
UTILITY_MARGIN = 0.05     # as the TAPPFL page: the release's utility probe at most 5 points under raw data's


def progress(line: str) -> None:
    print(f"[federated-protections] {line}", flush=True)


# ---------------------------------------------------------------------------------------------- running
def protections(args) -> list[tuple[str, dict]]:
    """(label, the settings that switch it on) of every run: none, SecAgg+, DP at each noise multiplier."""
    runs = [("none", {}), ("SecAgg+", {"secure_aggregation": "true"})]
    runs += [(f"DP, noise {noise:g}", {"dp_noise_multiplier": str(noise), "dp_clipping_norm": str(args.clipping_norm),
                                       "dp_delta": str(args.delta)}) for noise in args.noise]
    return runs


def settings(args, extra: dict) -> dict:
    """Every run the same federation: all devices sampled and averaged each round, no update filter (SecAgg+
    refuses one that judges single updates, so none of the runs has one and they stay comparable)."""
    base = {"clients": args.clients, "fraction": 1.0, "participation": "sampled", "rounds": args.rounds,
            "pretrain_rounds": args.pretrain_rounds, "local_epochs": args.local_epochs, "lam": args.lam,
            "privacy_bound": args.term, "norm_multiple": 0.0, "evaluate_every": args.rounds,
            "timeout_s": args.timeout_s, "progress": True, "reference_attacks": False, "release_attacks": False}
    return {key: str(value) for key, value in {**base, **extra}.items()}


def trained(label: str, extra: dict, args, out: Path) -> Path:
    folder = out / label.replace(" ", "").replace(",", "-").replace("+", "plus")
    return train_run("tappfl", DATASET["name"], data_path=None, useful=DATASET["useful"], private=DATASET["private"],
                     out=folder, attacker_epochs=args.attacker_epochs, settings=settings(args, extra))


def summary(result: dict) -> dict:
    """What the page keeps of one audit (re-id left out: the audit runs none on a representation)."""
    private = {name: figure for name, figure in result["private"].items() if name not in (REID, REID_OMNI)}
    strongest = max(private, key=lambda name: private[name]["mean"])
    return {"private": private, "strongest_attacker": strongest, "strongest": private[strongest],
            "utility": result["useful"], "random_star": result["random_star"], "power": result["power"]}


def audited_release(run_dir: Path, args) -> tuple[dict, np.ndarray]:
    """The ONNX bundle's output, as a device computes it, through the shared audit; and that output's test rows."""
    from sensorveil.runtime import Privatizer
    run = read_run(run_dir)
    bundle = export_run(run_dir, "onnx", run_dir.parent / f"{run_dir.name}-bundle", attacker_epochs=0)
    release = mechanisms.get("tappfl").release(run_dir, run, Privatizer.load(bundle, backend="onnxruntime"))
    return summary(audit(release, seeds=args.seeds, attacker_epochs=args.attacker_epochs, log=progress)), \
        release.test.numpy()


def raw_rows(run_dir: Path, args) -> dict:
    """The same audit on the raw rows (no mechanism): utility's reference and the audit's power."""
    task, _ = mechanisms.get("tappfl").task(run_dir, read_run(run_dir))
    return summary(audit(Release(task, task.x[task.attacker_train], task.x[task.test]), seeds=args.seeds,
                         attacker_epochs=args.attacker_epochs, log=progress))


def goal(point: dict, raw: dict) -> dict:
    """Privacy, utility and power, each named; "met" only when every part holds."""
    parts = {"privacy": point["strongest"]["mean"] <= point["random_star"] + GOAL_MARGIN,
             "utility": point["utility"]["mean"] >= raw["utility"]["mean"] - UTILITY_MARGIN,
             "power": raw["power"]["raw_strongest_accuracy"] > raw["random_star"] + GOAL_MARGIN}
    return {**parts, "verdict": "met" if all(parts.values()) else "no power" if not parts["power"] else "not met"}


def one_protection(label: str, extra: dict, args, out: Path) -> dict:
    started = time.time()
    run_dir = trained(label, extra, args, out)
    run = read_run(run_dir)
    federation = run["federation"]
    figures, released = audited_release(run_dir, args)
    point = {"protection": label, "settings": extra, **figures, "run": str(run_dir), "released": released,
             "differential_privacy": federation.get("differential_privacy"),
             "secure_aggregation": bool(federation.get("secure_aggregation")),
             "federation_seconds": federation["wall_seconds"], "seconds": round(time.time() - started, 1)}
    progress(f"{label}: strongest {point['strongest_attacker']} {point['strongest']['mean']:.3f}, utility "
             f"{point['utility']['mean']:.3f}, epsilon {epsilon_text(point)} ({time.strftime('%H:%M:%S')})")
    return point


def run_all(args) -> dict:
    out = Path(args.out)
    points = [one_protection(label, extra, args, out) for label, extra in protections(args)]
    raw = raw_rows(Path(points[0]["run"]), args)
    for point in points:
        point["goal"] = goal(point, raw)
        # how far this release's representation is from the unprotected one's, on the same test rows: SecAgg+'s
        # quantization moves it a little (so it ran), DP's noise more
        point["largest_difference_from_none"] = float(np.abs(point.pop("released") - points[0]["released"]).max()) \
            if point is not points[0] else 0.0
    points[0].pop("released")
    return {"dataset": DATASET, "flower": flower_version(), "raw": raw, "points": points,
            "settings": {key: getattr(args, key) for key in ("clients", "rounds", "pretrain_rounds", "local_epochs",
                                                              "lam", "term", "clipping_norm", "delta", "seeds",
                                                              "attacker_epochs")}}


# ---------------------------------------------------------------------------------------------- the page
def epsilon_text(point: dict) -> str:
    dp = point.get("differential_privacy")
    return "-" if not dp else f"{dp['epsilon']:.2f} at delta {dp['delta']:g} ({dp['rounds_released']} rounds)"


def table(results: dict) -> list[str]:
    raw, none = results["raw"], results["points"][0]
    lines = ["| protection | (epsilon, delta) | strongest attacker [95%] | utility [95%] | utility vs none | "
             "privacy / utility / power | goal |", "|---|---|---|---|---|---|---|",
             f"| raw rows (no mechanism) | - | {raw['strongest_attacker']} {cell(raw['strongest'])} | "
             f"{cell(raw['utility'])} | - | - | - |"]
    for point in results["points"]:
        parts = " / ".join("yes" if point["goal"][part] else "no" for part in ("privacy", "utility", "power"))
        cost = 100 * (point["utility"]["mean"] - none["utility"]["mean"])
        lines.append(f"| {point['protection']} | {epsilon_text(point)} | {point['strongest_attacker']} "
                     f"{cell(point['strongest'])} | {cell(point['utility'])} | {cost:+.1f} pts | {parts} | "
                     f"{point['goal']['verdict']} |")
    return lines


def findings(results: dict) -> list[str]:
    """What the table says, read from its figures."""
    points, none = results["points"], results["points"][0]
    dp = [p for p in points if p.get("differential_privacy")]
    lines = []
    secagg = next(p for p in points if p["secure_aggregation"])
    gap = 100 * abs(secagg["utility"]["mean"] - none["utility"]["mean"])
    a, b = secagg["utility"], none["utility"]
    overlap = a["low"] <= b["high"] and b["low"] <= a["high"]
    lines.append(f"- SecAgg+ against none: utility {gap:.1f} points apart, intervals "
                 f"{'overlapping' if overlap else 'NOT overlapping'}; its representation differs from the unprotected "
                 f"one's by at most {secagg['largest_difference_from_none']:.2g} (SecAgg+ quantizes each update "
                 "before masking), so it ran and barely moved the model. It hides single updates from the server "
                 "and is not meant to change the release.")
    for point in dp:
        lines.append(f"- {point['protection']}: epsilon {point['differential_privacy']['epsilon']:.2f}; the strongest "
                     f"attacker on the private attribute {100 * point['strongest']['mean']:.1f}% against Random* "
                     f"{100 * point['random_star']:.1f}%, utility {100 * point['utility']['mean']:.1f}%.")
    met = [p["protection"] for p in points if p["goal"]["verdict"] == "met"]
    lines.append(f"- Goal met by: {', '.join(met) if met else 'none of the runs'}. Differential privacy bounds "
                 "what the model reveals of one device's participation; the private attribute each released "
                 "representation carries is what the attackers measure, and a small epsilon does not bound it.")
    return lines


def markdown(results: dict) -> str:
    s = results["settings"]
    return "\n".join([
        "# What Flower's protections cost a federated release: SecAgg+ and client-side DP on TAPPFL", "",
        page_header(recorded(results)), "",
        f"TAPPFL on digits (private {DATASET['private']}, useful {DATASET['useful']}), Flower {results['flower']}'s "
        f"simulation runtime: {s['clients']} devices, every one trained and averaged every round, "
        f"{s['pretrain_rounds']} pre-training rounds and {s['rounds']} TAPPFL rounds at lambda {s['lam']:g} "
        f"({s['term']} term), {s['local_epochs']} local epochs, no update filter. Every run is the same federation "
        "with one protection switched on. *SecAgg+*: Flower's SecAgg+ workflow, the server learns the round's sum "
        "only. *DP*: Flower's client-side fixed clipping (each device clips its update to the clipping norm "
        f"{s['clipping_norm']:g}) and Gaussian noise on the aggregate, noise multiplier as named; (epsilon, delta) "
        "from the RDP accountant over every round released (pre-training included), no subsampling.", "",
        f"**Attackers**: the shared audit (sensorveil/sdk/audit.py) on each ONNX bundle's output: families "
        f"{', '.join(FAMILIES)}, {s['seeds']} seeds, mean and 95% interval; attackers train {s['attacker_epochs']} "
        "epochs. *Utility*: the audit's neural probe of the useful attribute. *Goal*: the strongest attacker within "
        f"{GOAL_MARGIN * 100:g} points of Random* ({100 * results['raw']['random_star']:.1f}%, the best guess from "
        f"the useful label), utility at most {UTILITY_MARGIN * 100:g} points under raw rows', and the audit's power "
        "(raw rows' strongest attacker more than 5 points above Random*); \"met\" only when all three hold.", "",
        *table(results), "", "## What it says", "", *findings(results), ""])


def write(results: dict, docs: Path) -> None:
    (docs / "federated_protections.json").write_text(json.dumps(portable(results, SHARED), indent=1) + "\n")
    (docs / "federated_protections.md").write_text(markdown(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--pretrain-rounds", type=int, default=3)
    parser.add_argument("--local-epochs", type=int, default=5)
    parser.add_argument("--lam", type=float, default=0.5)
    parser.add_argument("--term", default="ce", choices=["vclub", "ce"])
    parser.add_argument("--noise", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="DP noise multipliers")
    parser.add_argument("--clipping-norm", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--attacker-epochs", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--out", default=str(ROOT / "runs" / "federated-protections"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    results = {**run_all(args), "provenance": record}
    write(results, Path(args.docs))
    progress(f"wrote {args.docs}/federated_protections.md")


if __name__ == "__main__":
    main()
