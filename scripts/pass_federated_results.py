"""PASS trained federated (`pass-federated`): its exported bundle's audit beside central PASS and TAPPFL.

    python scripts/pass_federated_results.py [--datasets digits ujiindoorloc] [--out runs/pass-federated-results]
                                             [--rounds R] [--local-epochs E] [--aggregation fedavg]
                                             [--audit-seeds 3] [--quick] [--allow-dirty]
    python scripts/pass_federated_results.py --render-only   # the page again from its JSON, train nothing
    python scripts/pass_federated_results.py --refresh-beside   # the comparison rows re-read, train nothing

Per dataset (the tasks of scripts/pass_results.py: digits private lt5 / useful parity, UJIIndoorLoc private
region / useful floor): `train_run("pass-federated", ...)` on Flower's simulation runtime, digits IID over four
devices, UJIIndoorLoc one device per user of trainingData.csv (partition=groups partition_by=user), scored on
validationData.csv's rows (test_split=validation, as scripts/uji_validation_results.py) with that page's PASS
settings; `export_run(..., "onnx")`; and the audit of the bundle as the device runs it, exactly as
scripts/pass_results.py audits central PASS (`sensorveil evaluate`'s attacker families over seeds, 95% intervals,
Random*). Central PASS's and TAPPFL's figures are read from docs/pass_results.json (UJIIndoorLoc:
docs/uji_validation.json) and docs/tappfl_results.json when this script runs and stored in this page's JSON with
where they came from; none is typed by hand.

Goal: the strongest attacker within 5 points of Random* and mNAG >= 50%, trained without any raw row leaving its
device. Writes docs/pass_federated_results.json and .md (--docs picks another folder).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from sensorveil_lab.page_text import audit_lines, interval, para, pct, where_from
from sensorveil_lab.pass_pages import AUDIT_SEEDS, DESCRIPTIONS, GOAL_MNAG, GOAL_POINTS, TASKS
from sensorveil_lab.provenance import git, page_header, portable, provenance, recorded, require_clean

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))
DATASETS = ("digits", "ujiindoorloc")
COMMAND = "python scripts/pass_federated_results.py"
TAG = "[pass-federated-results]"
GOAL = (f"the strongest attacker within {100 * GOAL_POINTS:.0f} points of Random* and mNAG >= "
        f"{100 * GOAL_MNAG:.0f}%, trained with only model updates leaving each device")
# The federation per dataset. digits: the mechanism's defaults (4 IID devices, 15 rounds x 10 local epochs = the
# 150 epochs central PASS trains on digits). UJIIndoorLoc: one device per user ("clients" is computed: the users in
# PASS's training split), 20 rounds x 1 local epoch (central PASS trains 10 epochs there; FedAvg over devices that
# each hold one user's rows is given twice as many passes).
FEDERATION = {
    "digits": {"partition": "iid", "clients": 4, "rounds": 15, "local_epochs": 10},
    "ujiindoorloc": {"partition": "groups", "partition_by": "user", "rounds": 20, "local_epochs": 1},
}
# UJIIndoorLoc is split as a deployment meets it: the devices are trainingData.csv's users (validationData.csv's rows
# all carry USERID 0, so in a random split they would form one device of several people), and every figure is scored
# on validationData.csv's rows (other users and phones, months later): scripts/uji_validation_results.py's split, so
# central PASS beside it is that page's bundle, trained with the same PASS settings
DATASET_OPTIONS = {"ujiindoorloc": {"test_split": "validation"}}
BESIDE_UJI_VALIDATION = REPO / "docs" / "uji_validation.json"
# --quick: seconds, not minutes (a test runs it); the figures mean nothing
QUICK = {"clients": 2, "rounds": 1, "local_epochs": 1, "substitutes": 256, "cpus": 1}
QUICK_UJI_ROWS = 3000
BESIDE_PASS = REPO / "docs" / "pass_results.json"
BESIDE_TAPPFL = REPO / "docs" / "tappfl_results.json"


def log(message: str) -> None:
    print(f"{TAG} {message}", flush=True)


# ------------------------------------------------------------------ arithmetic
def audited_mnag(metrics: dict, device: dict, useful: list, private: list) -> "float | None":
    """mNAG (eq. 14) with the bundle audit's accuracies in place of the training-time attackers': the useful
    probe's mean for each useful attribute, the strongest family's mean for the private one (the audit scores one
    useful and one private attribute, so this is for single-attribute tasks; None otherwise)."""
    from sensorveil.sdk.mechanisms.pass_parts.evaluate import nag

    if device is None or len(useful) != 1 or len(private) != 1:
        return None
    rows = metrics["attributes"]
    strongest = device["private"][device["strongest_attacker"]]["mean"]
    kept = nag(device["useful"]["mean"], rows[useful[0]]["acc_guessing"], rows[useful[0]]["acc_no_suppr"])
    leaked = nag(strongest, rows[private[0]]["acc_guessing"], rows[private[0]]["acc_no_suppr"])
    return kept - leaked


def goal_verdict(device: "dict | None", mnag: float) -> dict:
    """This page's goal on an audited bundle: the strongest family's mean private accuracy at most Random* + 5
    points, and mNAG (the paper's, from the run) at least 50%."""
    if device is None:
        return {"met": False, "reason": "the bundle was not audited"}
    strongest = device["private"][device["strongest_attacker"]]["mean"]
    gap = strongest - device["random_star"]
    within = gap <= GOAL_POINTS
    return {"strongest_attacker": device["strongest_attacker"], "strongest_acc": strongest,
            "random_star": device["random_star"], "gap_points": 100 * gap, "within_5_points": within,
            "mnag": mnag, "mnag_at_least_50": mnag >= GOAL_MNAG, "met": bool(within and mnag >= GOAL_MNAG)}


# ------------------------------------------------------------------ the runs
def dataset_options(dataset: str, quick: bool) -> dict:
    quick_rows = {"max_rows": QUICK_UJI_ROWS} if quick and dataset == "ujiindoorloc" else {}
    return {**DATASET_OPTIONS.get(dataset, {}), **quick_rows}


def central_pass_settings(dataset: str, path: Path = BESIDE_UJI_VALIDATION) -> dict:
    """PASS's own settings (PASSConfig fields, as `--set` takes them) of the central run this one is compared with:
    UJIIndoorLoc's from docs/uji_validation.json's PASS entry (chosen as that page says), digits the defaults."""
    if dataset != "ujiindoorloc":
        return {}
    if not path.is_file():
        raise SystemExit(f"{path} not found: UJIIndoorLoc's federated run takes central PASS's settings from it "
                         "(run scripts/uji_validation_results.py first)")
    chosen = json.loads(path.read_text())["mechanisms"]["pass"]["pass_set"]
    return {key: str(value) for key, value in chosen.items() if key != "progress"}


def devices_by(dataset: str, data_path, options: dict, by: str) -> int:
    """The devices partition=groups gives: the values of ``by`` among PASS's training rows (pass_parts.data)."""
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.pass_parts.data import split_rows

    useful, private, _, _ = TASKS[dataset]
    data = load_dataset(dataset, data_path, **options)
    train, _ = split_rows(data, useful[0], private[0], seed=0)
    return int(len(np.unique(data.attributes[by][train])))


def federation_settings(dataset: str, data_path, options: dict, args) -> dict:
    settings = dict(FEDERATION[dataset])
    if args.quick:
        settings.update({k: v for k, v in QUICK.items() if k != "clients" or settings["partition"] != "groups"})
    for key in ("rounds", "local_epochs", "clients", "aggregation"):
        if getattr(args, key, None):
            settings[key] = getattr(args, key)
    if settings["partition"] == "groups":   # one device per value: the data says how many
        settings["clients"] = devices_by(dataset, data_path, options, settings["partition_by"])
    return settings


def rows_per_device(run_dir: Path, run: dict) -> list:
    """Each device's training rows, as the run recorded the partition its devices were given."""
    return [int(n) for n in run["federation"]["partition"]["rows_per_device"]]


def one_dataset(dataset: str, args, out: Path) -> dict:
    from sensorveil.export import export_run
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.runs import read_run, train_run

    useful, private, hidden, data_path = TASKS[dataset]
    if data_path is not None and not Path(data_path).is_file():
        return {"skipped": f"{data_path} not found (set SENSORVEIL_SHARED)"}
    started = time.time()
    options = dataset_options(dataset, args.quick)
    settings = federation_settings(dataset, data_path, options, args)
    pass_settings = central_pass_settings(dataset)
    log(f"{dataset}: training pass-federated, {settings['clients']} devices ({settings['partition']}"
        f"{' by ' + settings['partition_by'] if settings.get('partition_by') else ''}), {settings['rounds']} rounds x "
        f"{settings['local_epochs']} local epochs")
    run_dir = train_run("pass-federated", dataset, data_path=data_path, useful=useful, private=private, hidden=hidden,
                        out=out / "runs" / f"pass-federated-{dataset}", dataset_options=options or None,
                        attacker_epochs=args.attacker_epochs,
                        settings={**pass_settings, **{key: str(value) for key, value in settings.items()}})
    run = read_run(run_dir)
    log(f"{dataset}: trained in {run['train_seconds']:.0f} s (federation {run['federation']['wall_seconds']:.0f} s); "
        "exporting the ONNX bundle")
    bundle = export_run(run_dir, "onnx", out / "bundles" / f"pass-federated-{dataset}")
    log(f"{dataset}: auditing the bundle over {args.audit_seeds} seed(s)")
    device = audit_path(bundle, seeds=args.audit_seeds, attacker_epochs=args.attacker_epochs,
                        log=lambda line: log(f"{dataset}: {line}")) if args.audit_seeds else None
    metrics = {k: v for k, v in run["metrics"].items() if k != "confusion"}
    federation = run["federation"]
    rounds = federation["rounds"]
    return {
        "task": {"useful": useful, "private": private, "hidden": hidden},
        "dataset_options": options,
        "settings": settings,
        "pass_settings": pass_settings,
        "config": run["config"],
        "federation": {"runtime": federation["runtime"], "flower": federation["flower"],
                       "aggregation": federation["aggregation"], "wall_seconds": federation["wall_seconds"],
                       "partition": federation["partition"], "rows_per_device": rows_per_device(run_dir, run),
                       "bank_origin": run["substitution"]["bank_origin"],
                       "rounds": len(rounds), "updates_aggregated": sum(r["devices"] for r in rounds),
                       "updates_dropped": sum(len(r["dropped"]) for r in rounds),
                       "last_round_loss": rounds[-1]["train"] if rounds else None},
        "training": {k: v for k, v in run["training"].items() if k != "history"},
        "reference": run["reference"],
        "metrics": metrics,
        "bundle_evaluation": device,
        "audited_mnag": audited_mnag(metrics, device, useful, private),
        "goal": goal_verdict(device, metrics["mnag"]),
        "run_dir": str(run_dir),
        "bundle": str(bundle),
        "seconds": round(time.time() - started, 1),
    }


# ------------------------------------------------------------------ central PASS and TAPPFL, from their JSON
def committed(path: Path) -> str:
    """The commit that last changed ``path`` (the figures' file), or "not committed"."""
    return git("log", "-1", "--format=%h (%cs)", "--", str(path)) or "not committed"


def beside_pass(dataset: str, path: Path = BESIDE_PASS) -> dict:
    """Central PASS's bundle audit and mNAG on ``dataset``, as docs/pass_results.json holds them (UJIIndoorLoc:
    docs/uji_validation.json's, on the same split as this page's run)."""
    if dataset in DATASET_OPTIONS:
        return beside_validation_pass(BESIDE_UJI_VALIDATION)
    if not path.is_file():
        return {"missing": f"{path.name} not found"}
    results = json.loads(path.read_text())
    entry = results.get("datasets", {}).get(dataset)
    if not isinstance(entry, dict) or "skipped" in entry or not isinstance(entry.get("bundle_evaluation"), dict):
        return {"missing": f"{path.name} has no audited {dataset} entry"}
    device, metrics, task = entry["bundle_evaluation"], entry["metrics"], entry["task"]
    return {"source": f"docs/{path.name}", "where_from": where_from(entry), "file_committed_in": committed(path),
            "training": {k: entry["training"].get(k) for k in ("epochs", "pretrain_epochs", "fit_seconds")},
            "bundle_evaluation": device, "mnag": metrics["mnag"],
            "audited_mnag": audited_mnag(metrics, device, task["useful"], task["private"]),
            "goal": goal_verdict(device, metrics["mnag"])}


def beside_validation_pass(path: Path) -> dict:
    """Central PASS on UJIIndoorLoc's validation split, as docs/uji_validation.json holds it."""
    if not path.is_file():
        return {"missing": f"{path.name} not found"}
    entry = json.loads(path.read_text()).get("mechanisms", {}).get("pass")
    if not isinstance(entry, dict) or not isinstance(entry.get("bundle_evaluation"), dict):
        return {"missing": f"{path.name} has no audited PASS entry"}
    device, metrics = entry["bundle_evaluation"], entry["run_metrics"]
    return {"source": f"docs/{path.name}", "where_from": where_from(entry), "file_committed_in": committed(path),
            "training": {k: entry["training"].get(k) for k in ("epochs", "pretrain_epochs", "fit_seconds")},
            "bundle_evaluation": device, "mnag": metrics["mnag"],
            "audited_mnag": audited_mnag(metrics, device, *TASKS["ujiindoorloc"][:2]),
            "goal": goal_verdict(device, metrics["mnag"])}


def beside_tappfl(dataset: str, path: Path = BESIDE_TAPPFL) -> dict:
    """TAPPFL's bundle figures on ``dataset`` per lambda and privacy term, as docs/tappfl_results.json holds them:
    the shared audit's strongest family and utility probe, each with its 95% interval over the audit's seeds (it
    records no NAG, so no mNAG)."""
    if not path.is_file():
        return {"missing": f"{path.name} not found"}
    results = json.loads(path.read_text())
    found = [data for data in results.get("datasets", []) if data.get("dataset") == dataset]
    if not found:
        return {"missing": f"{path.name} has no {dataset} entry (made by `{recorded(results).get('command')}`)"}
    data = found[0]
    # each dataset's entry records the run that made it (a later run of another dataset keeps it as it was)
    record = recorded(data) if isinstance(data.get("provenance"), dict) else recorded(results)
    released = {(p["lam"], p["term"]): p for term in data["terms"].values() for p in term}    # lambda 0 is in both
    points = [{"lam": p["lam"], "term": p["term"], "strongest_attacker": p["strongest_attacker"],
               "strongest": p["strongest"], "random_star": p["random_star"], "useful": p["utility"],
               "goal": p["goal"]["verdict"]} for p in released.values()]
    return {"source": f"docs/{path.name}", "commit": record.get("commit"), "date": record.get("date"),
            "command": record.get("command"), "file_committed_in": committed(path), "devices": data.get("clients"),
            "partition": data.get("partition", {}).get("scheme"), "rounds": results.get("settings", {}).get("rounds"),
            "points": points}


# ------------------------------------------------------------------ the page
def settings_text(entry: dict) -> str:
    s, fed = entry["settings"], entry["federation"]
    split = (f"one device per {s['partition_by']} (partition=groups partition_by={s['partition_by']})"
             if s["partition"] == "groups" else f"{s['partition']} partition")
    sizes = fed["rows_per_device"]
    return (f"{fed['partition']['devices']} devices, {split}; rows per device {min(sizes)} to {max(sizes)} (median "
            f"{fed['partition']['rows_median']:g}; all: {', '.join(str(n) for n in sorted(sizes))}); {s['rounds']} "
            f"rounds x {s['local_epochs']} local epochs, {fed['aggregation']}, Flower {fed['flower']} "
            f"({fed['runtime']}); {fed['updates_aggregated']} updates aggregated, {fed['updates_dropped']} dropped; "
            f"federation {fed['wall_seconds']:.0f} s")


def rows_text(entry: dict) -> str:
    """Where the training rows and the bank were: on the devices, or held by the server (the bank's origin)."""
    metrics, fed, bank = entry["metrics"], entry["federation"], entry["training"]["bank_size"]
    origin = fed.get("bank_origin")
    if origin is None:   # a run from before the bank came from a declared, server-held source
        return (f"{metrics['n_attacker_train']} training rows (all on the devices) / {metrics['n_test']} test rows; "
                f"substitute bank {bank} rows sampled from those same training rows, its useful labels sent to every "
                "device and the bank shipped in the bundle (this run predates the server-held bank: its server held "
                "devices' rows)")
    held = (f"the dataset's declared bank rows ({origin['pool_rows']})" if origin["source"] == "declared" else
            f"{origin['pool_rows']} of them held by the server and given to no device")
    return (f"{metrics['n_attacker_train']} training rows ({sum(fed['rows_per_device'])} on the devices; {held}) / "
            f"{metrics['n_test']} test rows; substitute bank {bank} rows drawn from the server's set "
            f"(bank_source {origin['source']}), its useful labels sent to every device")


def strongest_text(device: "dict | None") -> str:
    if device is None:
        return "not audited"
    return f"{device['strongest_attacker']}: {interval(device['private'][device['strongest_attacker']])}"


def verdict(goal: dict) -> str:
    return "met" if goal.get("met") else "NOT met"


def summary_rows(datasets: dict) -> list:
    header = ["| dataset | mechanism | devices | bundle audit: strongest attacker [95%] | Random* "
              "| strongest - Random* (points) | mNAG | mNAG (audit) | useful accuracy (audit) | goal |",
              "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    return header + [line for name, entry in datasets.items() for line in summary_of(name, entry)] + [""]


def summary_of(name: str, entry: dict) -> list:
    """One dataset's summary rows: this page's run, central PASS's, TAPPFL's per lambda."""
    if "skipped" in entry:
        return [f"| {name} | pass-federated | skipped: {entry['skipped']} | | | | | | | |"]
    lines = []
    rows = [("**pass-federated** (this page)", entry["federation"]["partition"]["devices"],
             entry["bundle_evaluation"], entry["goal"], entry["metrics"]["mnag"], entry["audited_mnag"])]
    central = entry.get("beside", {}).get("pass", {})
    if "missing" not in central:
        rows.append(("PASS, central", "1 (all rows in one place)", central["bundle_evaluation"], central["goal"],
                     central["mnag"], central["audited_mnag"]))
    for label, devices, device, goal, mnag, mnag_audit in rows:
        if device is None:
            lines.append(f"| {name} | {label} | {devices} | not audited | | | {pct(mnag)} | | | NOT met |")
            continue
        lines.append(f"| {name} | {label} | {devices} | {strongest_text(device)} | {pct(device['random_star'])} "
                     f"| {goal['gap_points']:+.1f} | {pct(mnag)} | {pct(mnag_audit)} "
                     f"| {interval(device['useful'])} | {verdict(goal)} |")
    tappfl = entry.get("beside", {}).get("tappfl", {})
    for point in tappfl.get("points", []):
        lines.append(tappfl_row(name, tappfl.get("devices", "?"), point))
    return lines


def tappfl_row(name: str, devices, point: dict) -> str:
    """One TAPPFL release's summary row: the shared audit's strongest family and utility with intervals (a JSON
    copied before TAPPFL's page used the shared audit holds neural and trees means, one seed: shown as such)."""
    if "strongest_attacker" not in point:
        return (f"| {name} | TAPPFL, lambda {point['lam']:g} | {devices} "
                f"| neural / trees: {pct(point['neural'])} / {pct(point['trees'])} (one seed) "
                f"| {pct(point['random_star'])} | {100 * (point['strongest'] - point['random_star']):+.1f} "
                f"| - | - | {pct(point['useful'])} | - |")
    gap = 100 * (point["strongest"]["mean"] - point["random_star"])
    return (f"| {name} | TAPPFL, lambda {point['lam']:g} ({point['term']}) | {devices} "
            f"| {point['strongest_attacker']}: {interval(point['strongest'])} | {pct(point['random_star'])} "
            f"| {gap:+.1f} | - | - | {interval(point['useful'])} | {point['goal']} |")


def beside_lines(entry: dict) -> list:
    central, tappfl = entry.get("beside", {}).get("pass", {}), entry.get("beside", {}).get("tappfl", {})
    lines = []
    if "missing" in central:
        lines.append(f"Central PASS: {central['missing']}.")
    elif central:
        epochs = central["training"].get("epochs")
        lines.append(f"Central PASS ({epochs} epochs on all training rows in one place): from {central['source']}, "
                     f"{central['where_from']}; that file last committed in {central['file_committed_in']}.")
    if "missing" in tappfl:
        lines.append(f"TAPPFL: {tappfl['missing']}.")
    elif tappfl:
        audited = any("strongest_attacker" in point for point in tappfl.get("points", []))
        lines.append(f"TAPPFL ({tappfl['devices']} devices, {tappfl['partition']} partition, {tappfl['rounds']} "
                     "rounds; it releases a representation, not a substitute, and its attackers are "
                     + ("the shared audit's families over its seeds, with 95% intervals" if audited else
                        "a neural net and trees over one seed")
                     + f", with no mNAG recorded): from {tappfl['source']}, made by "
                     f"`{tappfl['command']}` on {tappfl['date']} from commit {tappfl['commit']}; "
                     f"that file last committed in {tappfl['file_committed_in']}.")
    return [para(line) + "\n" for line in lines]


def dataset_section(name: str, entry: dict) -> list:
    if "skipped" in entry:
        return [f"## {name}", "", f"Skipped: {entry['skipped']}.", ""]
    task, metrics, training, goal = entry["task"], entry["metrics"], entry["training"], entry["goal"]
    options = entry.get("dataset_options") or {}
    subset = f" (subset: {', '.join(f'{k}={v}' for k, v in options.items())})" if options else ""
    lines = [f"## {name}: private {', '.join(task['private'])}, useful {', '.join(task['useful'])}", "",
             para(f"{DESCRIPTIONS.get(name, name)}{subset}; computed {entry.get('timestamp', '?')}. "
                  f"{settings_text(entry)}. {rows_text(entry)}; lambda {training['lambda']:g}, mu "
                  f"{training['mu']:g}; whole run {entry['seconds']:.0f} s."), ""]
    lines += split_lines(name, entry)
    lines += ["| attribute | role | no suppr. | guessing | attacker: neural | NAG | attacker: trees |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for attr, row in metrics["attributes"].items():
        lines.append(f"| {attr} | {row['role']} | {pct(row['acc_no_suppr'])} | {pct(row['acc_guessing'])} "
                     f"| {pct(row['acc'])} | {pct(row['nag'])} | {pct(row.get('tree_acc'))} |")
    lines += ["", para(f"mNAG {pct(metrics['mnag'])} (the paper's, training-time neural attacker); "
                       f"{pct(entry['audited_mnag'])} with the bundle audit's useful probe and strongest attacker."),
              ""]
    lines += audit_lines(entry)
    if "within_5_points" in goal:
        lines += [para(f"Goal ({GOAL}): strongest attacker {goal['strongest_attacker']} {pct(goal['strongest_acc'])} "
                       f"against Random* {pct(goal['random_star'])}, {goal['gap_points']:+.1f} points, "
                       f"{'within' if goal['within_5_points'] else 'NOT within'} 5; mNAG {pct(goal['mnag'])} "
                       f"{'>=' if goal['mnag_at_least_50'] else '<'} 50: **{verdict(goal)}**."), ""]
    else:
        lines += [f"Goal: **NOT met** ({goal.get('reason', '?')}).", ""]
    return lines + beside_lines(entry)


def split_lines(name: str, entry: dict) -> list:
    """Where the rows come from, and the PASS settings taken from central PASS's page."""
    options, chosen = entry.get("dataset_options") or {}, entry.get("pass_settings") or {}
    lines = []
    if options.get("test_split") == "validation":
        lines.append("The devices hold trainingData.csv's rows, one device per user; every figure is scored on "
                     "validationData.csv's rows (other users and phones, months later), the split of "
                     "docs/uji_validation.md, whose PASS bundle is central PASS below.")
    elif name == "ujiindoorloc" and entry["settings"].get("partition_by") == "user":
        lines.append("UJIIndoorLoc's validationData.csv rows carry USERID 0 (the dataset does not name their users), "
                     "so its rows in PASS's training split form one device of their own, beside one device per user "
                     "of trainingData.csv.")
    if chosen:
        lines.append(f"PASS's own settings are central PASS's on that page: "
                     f"{', '.join(f'{k}={v}' for k, v in chosen.items())} (docs/uji_validation.md says how they were "
                     "chosen); the others are PASSConfig's defaults.")
    return [para(line) + "\n" for line in lines]


def predates_note(datasets: dict) -> list:
    """For results from runs made before the bank came from a server-held set: what those runs did."""
    old = [name for name, entry in datasets.items() if "skipped" not in entry
           and "bank_origin" not in entry.get("federation", {})]
    if not old:
        return []
    return [para(f"**These figures predate the server-held bank** ({', '.join(old)}): those runs sampled the "
                 "substitute bank from the devices' own training rows, sent every device the bank's useful labels and "
                 "shipped the bank in the bundle, and every simulated device loaded the whole data set to find its "
                 "share. So the goal's last condition did not hold for them, whatever the verdicts below say; "
                 f"`{COMMAND}` run again records where the bank came from (bank_source)."), ""]


def markdown(results: dict) -> str:
    """docs/pass_federated_results.md from the JSON this script writes: nothing here is measured."""
    datasets = results["datasets"]
    quick = " **Made with --quick: tiny settings, the figures mean nothing.**" if results.get("quick") else ""
    lines = ["# PASS trained federated: the exported bundle's audit beside central PASS and TAPPFL", "",
             para(page_header(recorded(results))), "",
             para(f"Every figure below is read from docs/pass_federated_results.json, which `{COMMAND}` writes: per "
                  "dataset it trains `pass-federated` on Flower's simulation runtime (each device runs PASS's loss "
                  "and optimiser steps on its own rows; only f and g, the model's weights, go to the server, which "
                  "validates every update and combines them; the server holds the substitute bank, drawn from a set "
                  "no device is given, and sends every device its useful labels), exports the ONNX bundle and "
                  "audits it as "
                  "scripts/pass_results.py audits central PASS's. "
                  f"`{COMMAND} --render-only` rewrites this page from that JSON. Central PASS's and TAPPFL's rows are "
                  "copied from docs/pass_results.json and docs/tappfl_results.json when the script ran; each section "
                  f"says which run made them.{refreshed_note(results)}{quick}"),
             "",
             para("*Bundle audit*: every attacker family (`sensorveil evaluate`) trains on the bundle's released "
                  "training split and is scored on its test split, over seeds, mean with its 95% interval. "
                  "*Random\\**: the best guess of the private attribute from public knowledge. *mNAG* (PASS eq. 14): "
                  "the useful attributes' NAG minus the private ones'; *mNAG (audit)*: the same with the audit's "
                  "useful probe and strongest attacker. Figures are percentages."), "",
             f"**Goal**: {GOAL}.", "", *predates_note(datasets), "## Summary", ""]
    lines += summary_rows(datasets)
    for name, entry in datasets.items():
        lines += dataset_section(name, entry)
    return "\n".join(lines).rstrip() + "\n"


def refreshed_note(results: dict) -> str:
    """The sentence naming the last re-reading of the comparison rows (--refresh-beside), if any."""
    record = results.get("beside_refreshed")
    if not isinstance(record, dict):
        return ""
    return (f" Those rows were last re-read by `{record['command']}` on {record['date']}, from commit "
            f"{record['commit']}" + (" with uncommitted changes" if record.get("dirty") else "") + ".")


def beside_rows(dataset: str) -> dict:
    """Central PASS's and TAPPFL's rows for ``dataset``, copied from their pages as they are now."""
    return {"pass": beside_pass(dataset), "tappfl": beside_tappfl(dataset)}


def refresh_beside(results: dict, allow_dirty: bool) -> dict:
    """The comparison rows copied again from their pages as they are now (central PASS and TAPPFL rerun on their
    own commits); the federated runs' own figures are left as their run made them."""
    for dataset, entry in results["datasets"].items():
        entry["beside"] = beside_rows(dataset)
    results["beside_refreshed"] = provenance(allow_dirty=allow_dirty)
    return portable(results, shared=SHARED)


# ------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--out", default=str(REPO / "runs" / "pass-federated-results"), help="runs and bundles")
    parser.add_argument("--docs", default=str(REPO / "docs"), help="where the JSON and the page go")
    parser.add_argument("--rounds", type=int, default=0, help="override each dataset's rounds")
    parser.add_argument("--local-epochs", type=int, default=0, help="override each dataset's local epochs")
    parser.add_argument("--clients", type=int, default=0, help="override the devices of an iid dataset")
    parser.add_argument("--aggregation", default="", help="fedavg (default), fedmedian or fedtrimmedavg")
    parser.add_argument("--attacker-epochs", type=int, default=20)
    parser.add_argument("--audit-seeds", type=int, default=AUDIT_SEEDS, help="seeds of the bundle's audit (0: none)")
    parser.add_argument("--quick", action="store_true", help="tiny settings (a test's run); the figures mean nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from its JSON; train nothing")
    parser.add_argument("--refresh-beside", action="store_true",
                        help="copy central PASS's and TAPPFL's rows again from their pages, then render; train nothing")
    args = parser.parse_args()
    docs = Path(args.docs)
    json_path, page = docs / "pass_federated_results.json", docs / "pass_federated_results.md"
    if args.render_only or args.refresh_beside:
        results = json.loads(json_path.read_text())
        if args.refresh_beside:
            require_clean(args.allow_dirty)
            results = refresh_beside(results, args.allow_dirty)
            json_path.write_text(json.dumps(results, indent=2, default=float) + "\n")
        page.write_text(markdown(results))
        print(f"wrote {page}")
        return
    require_clean(args.allow_dirty)
    if args.quick:
        args.attacker_epochs, args.audit_seeds = 1, min(args.audit_seeds, 1)
    out = Path(args.out)
    docs.mkdir(parents=True, exist_ok=True)
    from sensorveil.benchmarks.report import cpu_description

    results = {"generated_by": "scripts/pass_federated_results.py", "cpu": cpu_description(),
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "goal": GOAL, "quick": args.quick,
               "attacker_epochs": args.attacker_epochs, "audit_seeds": args.audit_seeds, "datasets": {},
               "provenance": provenance(allow_dirty=args.allow_dirty)}
    log(f"goal: {GOAL}")
    for dataset in args.datasets:
        entry = one_dataset(dataset, args, out)
        entry["beside"] = beside_rows(dataset)
        results["datasets"][dataset] = {**entry, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        results = portable(results, shared=SHARED)
        json_path.write_text(json.dumps(results, indent=2, default=float) + "\n")   # partial results survive
        goal = entry.get("goal", {})
        log(f"{dataset}: goal {verdict(goal)} ({json.dumps({k: goal.get(k) for k in ('gap_points', 'mnag')})}); "
            f"{entry.get('seconds', 0):.0f} s")
    page.write_text(markdown(results))
    log(f"wrote {json_path} and {page}")


if __name__ == "__main__":
    main()
