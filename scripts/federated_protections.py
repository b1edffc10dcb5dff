#!/usr/bin/env python
"""What Flower's protections cost a federated release: TAPPFL or PASS (``--mechanism``) on digits (private lt5,
useful parity), trained the same way without them, with SecAgg+, and with client-side differential privacy at
several noise multipliers, each release exported to ONNX and put through the audit every mechanism's page uses
(sensorveil/sdk/audit.py), beside the raw rows' audit and the (epsilon, delta) each DP run spent. Written to
docs/federated_protections.{json,md} (TAPPFL) and docs/federated_protections-pass-federated.{json,md} (PASS);
every figure on those pages comes from this script:

    python scripts/federated_protections.py [--clients 10] [--rounds 8] [--noise 1 2 4] [--clipping-norm 1]
    python scripts/federated_protections.py --mechanism pass-federated [--rounds 8] [--local-epochs 5]

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
from sensorveil.sdk.audit import GOAL_MARGIN, REID, REID_OMNI, Release, audit
from sensorveil.sdk.mechanisms.tappfl import flower_version
from sensorveil.sdk.runs import read_run, train_run
from sensorveil_lab.page_text import cell
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASET = {"name": "digits", "useful": "parity", "private": "lt5"}
UTILITY_MARGIN = 0.05     # as the TAPPFL page: the release's utility probe at most 5 points under raw data's


def tappfl_settings(args) -> dict:
    return {"fraction": 1.0, "participation": "sampled", "pretrain_rounds": args.pretrain_rounds, "lam": args.lam,
            "privacy_bound": args.term, "evaluate_every": args.rounds, "reference_attacks": False,
            "release_attacks": False}


def tappfl_setup(s: dict) -> str:
    return (f"{s['pretrain_rounds']} pre-training rounds and {s['rounds']} TAPPFL rounds at lambda {s['lam']:g} "
            f"({s['term']} term), {s['local_epochs']} local epochs")


def pass_setup(s: dict) -> str:
    return (f"{s['rounds']} rounds of PASS's own loss and optimiser step (eq. 3, the paper's default weights), "
            f"{s['local_epochs']} local epochs; the substitute bank is a share of the training split the server "
            "holds and no device is given (bank_source=server-split)")


def largest_difference(released: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(released - reference).max())


def share_drawn_otherwise(released: np.ndarray, reference: np.ndarray) -> float:
    """The share of test rows whose substitute differs (both releases drawn from the same replayed seed)."""
    return float(np.mean(np.any(released.reshape(len(released), -1) != reference.reshape(len(reference), -1), axis=1)))


# what differs between the mechanisms the page covers; everything else is one code path
MECHANISMS = {
    "tappfl": {"label": "TAPPFL", "stem": "federated_protections", "settings": tappfl_settings,
               "setup": tappfl_setup, "left_out": (REID, REID_OMNI),     # the audit runs no re-id on a representation
               "difference": largest_difference, "rounds_released": " (pre-training included)",
               "release": "released representation",
               "moved": lambda x: f"its representation differs from the unprotected one's by at most {x:.2g}"},
    "pass-federated": {"label": "PASS (federated)", "stem": "federated_protections-pass-federated",
                       "settings": lambda args: {"bank_source": "server-split"}, "setup": pass_setup, "left_out": (),
                       "difference": share_drawn_otherwise, "rounds_released": "", "release": "release",
                       "moved": lambda x: (f"{100 * x:.1f}% of its test rows draw another substitute than the "
                                           "unprotected run's (both drawn from the same replayed seed)")},
}


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
    base = {"clients": args.clients, "rounds": args.rounds, "local_epochs": args.local_epochs, "norm_multiple": 0.0,
            "timeout_s": args.timeout_s, "progress": True, **MECHANISMS[args.mechanism]["settings"](args)}
    return {key: str(value) for key, value in {**base, **extra}.items()}


def trained(label: str, extra: dict, args, out: Path) -> Path:
    folder = out / label.replace(" ", "").replace(",", "-").replace("+", "plus")
    return train_run(args.mechanism, DATASET["name"], data_path=None, useful=DATASET["useful"],
                     private=DATASET["private"], out=folder, attacker_epochs=args.attacker_epochs,
                     settings=settings(args, extra))


def summary(result: dict, left_out=()) -> dict:
    """What the page keeps of one audit: every family but ``left_out``."""
    private = {name: figure for name, figure in result["private"].items() if name not in left_out}
    strongest = max(private, key=lambda name: private[name]["mean"])
    return {"private": private, "strongest_attacker": strongest, "strongest": private[strongest],
            "utility": result["useful"], "random_star": result["random_star"], "power": result["power"]}


def audited_release(run_dir: Path, args) -> tuple[dict, np.ndarray, object]:
    """The ONNX bundle's output, as a device computes it, through the shared audit; that output's test rows; and
    the release's raw task (its rows before the mechanism)."""
    from sensorveil.runtime import Privatizer
    run = read_run(run_dir)
    mechanism = mechanisms.get(args.mechanism)
    bundle = export_run(run_dir, "onnx", run_dir.parent / f"{run_dir.name}-bundle", attacker_epochs=0)
    # the draws replay seed 0 (a device draws from the OS), so two runs' releases differ only where their models do
    privatizer = Privatizer.load(bundle, backend="onnxruntime", seed=0, **mechanism.audit_load_options)
    release = mechanism.release(run_dir, run, privatizer)
    result = audit(release, seeds=args.seeds, attacker_epochs=args.attacker_epochs, log=progress)
    return summary(result, MECHANISMS[args.mechanism]["left_out"]), release.test.numpy(), release.raw()


def raw_rows(task, args) -> dict:
    """The same audit on the raw rows (no mechanism): utility's reference and the audit's power."""
    return summary(audit(Release(task, task.x[task.attacker_train], task.x[task.test]), seeds=args.seeds,
                         attacker_epochs=args.attacker_epochs, log=progress), MECHANISMS[args.mechanism]["left_out"])


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
    figures, released, raw_task = audited_release(run_dir, args)
    point = {"protection": label, "settings": extra, **figures, "run": str(run_dir), "released": released,
             "raw_task": raw_task,
             "differential_privacy": federation.get("differential_privacy"),
             "secure_aggregation": bool(federation.get("secure_aggregation")),
             "federation_seconds": federation["wall_seconds"], "seconds": round(time.time() - started, 1)}
    progress(f"{label}: strongest {point['strongest_attacker']} {point['strongest']['mean']:.3f}, utility "
             f"{point['utility']['mean']:.3f}, epsilon {epsilon_text(point)} ({time.strftime('%H:%M:%S')})")
    return point


def run_all(args) -> dict:
    out = Path(args.out)
    points = [one_protection(label, extra, args, out) for label, extra in protections(args)]
    raw = raw_rows(points[0]["raw_task"], args)
    for point in points:
        point.pop("raw_task")
        point["goal"] = goal(point, raw)
        # how far this release's representation is from the unprotected one's, on the same test rows: SecAgg+'s
        # quantization moves it a little (so it ran), DP's noise more
        difference = MECHANISMS[args.mechanism]["difference"]
        point["largest_difference_from_none"] = difference(point.pop("released"), points[0]["released"]) \
            if point is not points[0] else 0.0
    points[0].pop("released")
    return {"mechanism": args.mechanism, "dataset": DATASET, "flower": flower_version(), "raw": raw, "points": points,
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
    moved, noun = (MECHANISMS[results.get("mechanism", "tappfl")][key] for key in ("moved", "release"))
    dp = [p for p in points if p.get("differential_privacy")]
    lines = []
    secagg = next(p for p in points if p["secure_aggregation"])
    gap = 100 * abs(secagg["utility"]["mean"] - none["utility"]["mean"])
    a, b = secagg["utility"], none["utility"]
    overlap = a["low"] <= b["high"] and b["low"] <= a["high"]
    lines.append(f"- SecAgg+ against none: utility {gap:.1f} points apart, intervals "
                 f"{'overlapping' if overlap else 'NOT overlapping'}; {moved(secagg['largest_difference_from_none'])} "
                 "(SecAgg+ quantizes each update "
                 "before masking), so it ran and barely moved the model. It hides single updates from the server "
                 "and is not meant to change the release.")
    for point in dp:
        lines.append(f"- {point['protection']}: epsilon {point['differential_privacy']['epsilon']:.2f}; the strongest "
                     f"attacker on the private attribute {100 * point['strongest']['mean']:.1f}% against Random* "
                     f"{100 * point['random_star']:.1f}%, utility {100 * point['utility']['mean']:.1f}%.")
    met = [p["protection"] for p in points if p["goal"]["verdict"] == "met"]
    lines.append(f"- Goal met by: {', '.join(met) if met else 'none of the runs'}. Differential privacy bounds "
                 "what the model reveals of one device's participation; the private attribute each "
                 f"{noun} carries is what the attackers measure, and a small epsilon does not bound it.")
    return lines


def markdown(results: dict) -> str:
    s, mechanism = results["settings"], MECHANISMS[results.get("mechanism", "tappfl")]
    return "\n".join([
        f"# What Flower's protections cost a federated release: SecAgg+ and client-side DP on {mechanism['label']}", "",
        page_header(recorded(results)), "",
        f"{mechanism['label']} on digits (private {DATASET['private']}, useful {DATASET['useful']}), Flower "
        f"{results['flower']}'s simulation runtime: {s['clients']} devices, every one trained and averaged every "
        f"round, {mechanism['setup'](s)}, no update filter. Every run is the same federation "
        "with one protection switched on. *SecAgg+*: Flower's SecAgg+ workflow, the server learns the round's sum "
        "only. *DP*: Flower's client-side fixed clipping (each device clips its update to the clipping norm "
        f"{s['clipping_norm']:g}) and Gaussian noise on the aggregate, noise multiplier as named; (epsilon, delta) "
        f"from the RDP accountant over every round released{mechanism['rounds_released']}, no subsampling.", "",
        f"**Attackers**: the shared audit (sensorveil/sdk/audit.py) on each ONNX bundle's output: families "
        f"{', '.join(results['points'][0]['private'])}, {s['seeds']} seeds, mean and 95% interval; attackers train "
        f"{s['attacker_epochs']} epochs. *Utility*: the audit's neural probe of the useful attribute. *Goal*: the "
        "strongest attacker within "
        f"{GOAL_MARGIN * 100:g} points of Random* ({100 * results['raw']['random_star']:.1f}%, the best guess from "
        f"the useful label), utility at most {UTILITY_MARGIN * 100:g} points under raw rows', and the audit's power "
        "(raw rows' strongest attacker more than 5 points above Random*); \"met\" only when all three hold.", "",
        *table(results), "", "## What it says", "", *findings(results), ""])


def write(results: dict, docs: Path) -> Path:
    stem = MECHANISMS[results["mechanism"]]["stem"]
    (docs / f"{stem}.json").write_text(json.dumps(portable(results, SHARED), indent=1) + "\n")
    (docs / f"{stem}.md").write_text(markdown(results))
    return docs / f"{stem}.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanism", default="tappfl", choices=sorted(MECHANISMS))
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
    parser.add_argument("--out", default=None, help="run folders (default runs/federated-protections[-MECHANISM])")
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    require_clean(args.allow_dirty)
    args.out = args.out or str(ROOT / "runs" / ("federated-protections" + ("" if args.mechanism == "tappfl"
                                                                            else f"-{args.mechanism}")))
    record = provenance(allow_dirty=args.allow_dirty)
    results = {**run_all(args), "provenance": record}
    progress(f"wrote {write(results, Path(args.docs))}")


if __name__ == "__main__":
    main()
