"""PASS's settings on docs/uji_validation.md (scripts/uji_validation_results.py): `--select`'s choice of one setting
on UJIIndoorLoc users held out of trainingData.csv, made before any validationData row is loaded, and the page's
record of the settings tried on the validation rows."""
from __future__ import annotations

import argparse
import time

from sensorveil.sdk.datasets.ujiindoorloc import UJI_HELD_OUT_USERS
from sensorveil_lab.page_text import interval, para, pct
from sensorveil_lab.pass_pages import GOAL_POINTS

SELECT_SPLIT = {"split": "train", "test_split": "held-out-users"}   # --select's rows: trainingData.csv alone
SELECT_RULE = (f"the highest floor accuracy among the values whose strongest region attacker is within "
               f"{100 * GOAL_POINTS:.0f} points of Random* (if none is, the smallest gap to Random*); ties go to the "
               "smaller value")
SELECTION_FIGURES = ("floor_acc", "strongest_attacker", "strongest_acc", "random_star", "gap_points", "privacy_kept")


# ------------------------------------------------------------------ --select
def select_values(text: str) -> tuple:
    """--select KEY=V1,V2,... -> (KEY, [V1, V2, ...]); the values must be numbers (ties go to the smaller)."""
    key, _, values = text.partition("=")
    values = [value.strip() for value in values.split(",")]
    try:
        [float(value) for value in values]
    except ValueError:
        key = ""
    if not key.strip():
        raise SystemExit(f"--select takes KEY=V1,V2,... with numbers (e.g. mu=0.2,0.5,1,2); got {text!r}")
    return key.strip(), values


def choose(points: list) -> str:
    """SELECT_RULE over the selection's points."""
    kept = [point for point in points if point["privacy_kept"]]
    if kept:
        return min(kept, key=lambda point: (-point["floor_acc"]["mean"], float(point["value"])))["value"]
    return min(points, key=lambda point: (point["gap_points"], float(point["value"])))["value"]


def select_setting(args, options: dict, run_pass, log) -> dict:
    """PASS trained (one seed), exported and audited with --select-audit-seeds once per --select value on the
    held-out users' rows (``options``: SELECT_SPLIT's); SELECT_RULE's choice. ``run_pass(name, args)``: the
    page's train-export-audit step, returning its entry."""
    key, values = select_values(args.select)
    points, started = [], time.time()
    for value in values:
        log(f"selection: {key}={value}, trained on the other users' trainingData rows and audited on the rows of "
            f"users {', '.join(map(str, UJI_HELD_OUT_USERS))}")
        trial = argparse.Namespace(**{**vars(args), "audit_seeds": args.select_audit_seeds,
                                      "pass_set": [*(args.pass_set or []), f"{key}={value}"]})
        entry = run_pass(f"{key}={value}", trial)
        device = entry["bundle_evaluation"]
        points.append({"value": value, **{k: entry["goal"][k] for k in SELECTION_FIGURES},
                       "n_train": device["n_attacker_train"], "n_test": device["n_test"], "seconds": entry["seconds"]})
    chosen = choose(points)
    log(f"selection: {key}={chosen} chosen ({SELECT_RULE}); {time.time() - started:.0f} s")
    return {"key": key, "points": points, "chosen": chosen, "rule": SELECT_RULE, "dataset_options": options,
            "held_out_users": list(UJI_HELD_OUT_USERS), "audit_seeds": args.select_audit_seeds,
            "seconds": round(time.time() - started, 1), "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def selection_lines(results: dict) -> list:
    """The page's "How the setting was chosen", or a warning that PASS's settings were given by hand."""
    chosen = results.get("pass_selection")
    if not chosen:
        return [para("PASS's settings on this page were given by hand (`--pass-set`), not chosen by `--select` on "
                     "held-out users: if they were picked after seeing figures on these validation rows, the page is "
                     "optimistic by that choice."), ""]
    key, options = chosen["key"], ", ".join(f"{k}={v}" for k, v in chosen["dataset_options"].items())
    first = chosen["points"][0]
    lines = ["## How the setting was chosen", "",
             para(f"PASS's {key} was chosen before any validationData row was loaded. For each value PASS was trained "
                  f"(one seed, its other settings as above) on trainingData.csv with users "
                  f"{', '.join(map(str, chosen['held_out_users']))} held out (loader options: {options}; "
                  f"{first['n_train']} training rows, {first['n_test']} rows of the held-out users, whose phones no "
                  "training user has), and its ONNX bundle was exported and audited on the held-out users' rows "
                  f"({chosen['audit_seeds']} audit seed(s)). Rule: {chosen['rule']}. Chosen: **{key}="
                  f"{chosen['chosen']}**, the value the run above uses. The validationData rows played no part in the "
                  f"choice. Computed {chosen['timestamp']} in {chosen.get('seconds', 0):.0f} s."), "",
             f"| {key} | floor accuracy [95%] | strongest region attacker [95%] | Random* | minus Random* (points) "
             "| privacy kept | chosen |", "|---:|---:|---|---:|---:|---|---|"]
    lines += [f"| {p['value']} | {interval(p['floor_acc'])} | {p['strongest_attacker']}: {interval(p['strongest_acc'])}"
              f" | {pct(p['random_star'])} | {p['gap_points']:+.1f} | {'yes' if p['privacy_kept'] else 'NO'} "
              f"| {'**chosen**' if p['value'] == chosen['chosen'] else ''} |" for p in chosen["points"]]
    return lines + [""]


# ------------------------------------------------------------------ the record of settings tried
def sweep_point(entry: dict, record: dict, quick: bool) -> dict:
    """One PASS run's settings and its goal figures, for the page's record of settings tried."""
    goal = entry["goal"]
    return {"pass_set": entry["pass_set"], "quick": quick, "timestamp": entry["timestamp"],
            "commit": record.get("commit"), "dirty": record.get("dirty"),
            "floor_acc": goal["floor_acc"]["mean"], "strongest_attacker": goal["strongest_attacker"],
            "strongest_acc": goal["strongest_acc"]["mean"], "random_star": goal["random_star"],
            "gap_points": goal["gap_points"], "met": goal["met"]}


def merged_sweep(earlier: list, point: dict) -> list:
    """The earlier points and this run's, which replaces one with the same settings; a full run also drops the
    --quick points (their figures mean nothing)."""
    def kept(other: dict) -> bool:
        if other.get("quick") and not point["quick"]:
            return False
        return (other.get("pass_set"), other.get("quick")) != (point["pass_set"], point["quick"])
    return [other for other in earlier if kept(other)] + [point]


def sweep_lines(results: dict) -> list:
    points = results.get("pass_sweep") or []
    if not points:
        return []
    lines = ["## PASS settings tried", "",
             para("Each PASS run this script made into this JSON, one row per setting (a later run with the same "
                  "settings replaces its row): the bundle audit's floor accuracy and strongest region attacker on "
                  "the validation rows. Only the row of the run above has its full audit on this page."), "",
             "| PASS settings | floor accuracy | strongest region attacker | Random* | minus Random* (points) | goal "
             "| computed | commit |", "|---|---:|---|---:|---:|---|---|---|"]
    for point in points:
        commit = f"{point.get('commit')}{' (dirty)' if point.get('dirty') else ''}"
        settings = ", ".join(f"{k}={v}" for k, v in point["pass_set"].items() if k != "progress")
        lines.append(f"| {settings}{' (--quick)' if point.get('quick') else ''} | {pct(point['floor_acc'])} "
                     f"| {point['strongest_attacker']}: {pct(point['strongest_acc'])} | {pct(point['random_star'])} "
                     f"| {point['gap_points']:+.1f} | {'met' if point['met'] else 'NOT met'} | {point['timestamp']} "
                     f"| {commit} |")
    return lines + [""]
