"""Utility that survives new users: PASS and PR-GAN's exported bundles audited on UJIIndoorLoc's validationData rows.

    python scripts/uji_validation_results.py [--pass-set input_dropout=0.4 mu=...] [--mechanisms pass prgan]
                                             [--select mu=0.2,0.5,1,2] [--select-audit-seeds 1]
                                             [--audit-seeds 3] [--attacker-epochs 20] [--out runs/uji-validation]
                                             [--json docs/uji_validation.json] [--markdown docs/uji_validation.md]
                                             [--quick] [--allow-dirty]
    python scripts/uji_validation_results.py --render-only   # rewrite the page from the JSON, train nothing

UJIIndoorLoc ships validationData.csv: 1,111 fingerprints taken by other users and phones, months after the
19,937 of trainingData.csv. With the loader's `test_split=validation` every model and attacker learns from
trainingData rows only and everything is scored on exactly the validationData rows. On that split this script
trains PASS (scripts/pass_results.py's UJIIndoorLoc task and settings, with `input_dropout=0.4` and whatever
--pass-set adds) and PR-GAN (as scripts/prgan_results.py configures it for UJIIndoorLoc), exports each ONNX bundle
and audits it as the device runs it (`sensorveil evaluate`'s attacker families over seeds, 95% intervals, Random*;
its utility probe is the floor classifier trained on the bundle's output of the training rows and scored on its
output of the validation rows). A raw-data floor classifier and raw-data region attackers, trained and scored on the
same rows the same way, are the reference.

--select KEY=V1,V2,... chooses one PASS setting before any validationData row is loaded: for each value PASS is
trained (one seed, the other settings as given), exported and audited (--select-audit-seeds) on the loader's
`split=train test_split=held-out-users` split (trainingData.csv alone, four whole users and their phones held out as
the test rows); the rule (SELECT_RULE) picks the value that the validation run then uses, and the page shows every
value's figures in "How the setting was chosen".

Goal: floor utility >= 75% on the validation rows, privacy kept (strongest region attacker within 5 points of
Random*). A run given --mechanisms keeps the other mechanism's earlier entry; every PASS run is also added to the
page's record of PASS settings tried (a sweep of input_dropout / mu is one run per setting).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sensorveil_lab.page_text import interval, para, pct
from sensorveil_lab.pass_pages import AUDIT_SEEDS, GOAL_POINTS, TASKS
from sensorveil_lab.prgan_pages import prgan_config, without_machine_paths
from sensorveil_lab.provenance import page_header, provenance, recorded, require_clean
from sensorveil_lab.uji_pass_settings import (
    SELECT_SPLIT,
    merged_sweep,
    select_setting,
    selection_lines,
    sweep_lines,
    sweep_point,
)

REPO = Path(__file__).resolve().parents[1]
DATASET = "ujiindoorloc"
USEFUL, PRIVATE, DATA_PATH = TASKS[DATASET][0][0], TASKS[DATASET][1][0], TASKS[DATASET][3]
SPLIT = {"test_split": "validation"}
MECHANISMS = ("pass", "prgan")
LABELS = {"pass": "PASS", "prgan": "PR-GAN"}
COMMAND = "python scripts/uji_validation_results.py"
TAG = "[uji-validation]"
GOAL_UTILITY = 0.75
GOAL = (f"floor utility >= {100 * GOAL_UTILITY:.0f}% on the validation rows, privacy kept (strongest region attacker "
        f"within {100 * GOAL_POINTS:.0f} points of Random*)")
# PASS's settings beyond scripts/pass_results.py's UJIIndoorLoc run (which takes PASSConfig's defaults): the
# augmentation for phones that hear fewer access points; --pass-set adds or overrides (values as `--set` takes them)
PASS_DEFAULTS = {"input_dropout": "0.4", "progress": "false"}
# --quick: seconds, not minutes (a test runs it); the figures mean nothing
QUICK_ROWS = 400
QUICK_PASS = {"epochs": "1", "substitutes": "128"}
QUICK_EPOCHS = 1


def log(message: str) -> None:
    print(f"{TAG} {message}", flush=True)


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ------------------------------------------------------------------ arithmetic
def verdict(floor: dict, private: dict, random_star: float) -> dict:
    """The goal on one row: floor accuracy's mean >= 75%, and the strongest family's mean region accuracy at most
    Random* + 5 points. ``private``: family -> interval; ``floor``: an interval."""
    strongest = max(private, key=lambda family: private[family]["mean"])
    gap = private[strongest]["mean"] - random_star
    utility_ok, privacy_kept = floor["mean"] >= GOAL_UTILITY, gap <= GOAL_POINTS
    return {"floor_acc": floor, "strongest_attacker": strongest, "strongest_acc": private[strongest],
            "random_star": random_star, "gap_points": 100 * gap, "utility_at_least_75": bool(utility_ok),
            "privacy_kept": bool(privacy_kept), "met": bool(utility_ok and privacy_kept)}


# ------------------------------------------------------------------ the runs
def dataset_options(quick: bool, split: dict = SPLIT) -> dict:
    return {**split, **({"max_rows": QUICK_ROWS} if quick else {})}


def rows_text(options: dict, test: bool = False) -> str:
    if options.get("test_split") == "held-out-users":
        return "held-out users' rows" if test else "other users' trainingData rows"
    return "validation rows" if test else "trainingData rows"


def pass_settings(pairs, quick: bool) -> dict:
    """PASS_DEFAULTS, --quick's tiny ones, then --pass-set KEY=VALUE (later wins), as strings for train_run."""
    from sensorveil.cli.common import parse_settings

    return {**PASS_DEFAULTS, **(QUICK_PASS if quick else {}), **parse_settings(pairs)}


def train_pass(out: Path, options: dict, args) -> Path:
    from sensorveil.sdk.runs import train_run

    settings = pass_settings(args.pass_set, args.quick)
    log(f"PASS: training on the {rows_text(options)} ({', '.join(f'{k}={v}' for k, v in settings.items())}); "
        "its own probing attack follows")
    return train_run("pass", DATASET, data_path=DATA_PATH, useful=[USEFUL], private=[PRIVATE], hidden=[],
                     out=out / "runs" / "pass", dataset_options=options, attacker_epochs=args.attacker_epochs,
                     settings=settings)


def train_prgan(out: Path, options: dict, args) -> Path:
    from sensorveil.sdk.runs import train_run

    epochs = QUICK_EPOCHS if args.quick else None
    config = prgan_config(DATASET, argparse.Namespace(epochs=epochs, classifier_epochs=epochs))
    if args.quick:
        config.margin_fractions = config.margin_fractions[:1]
    log(f"PR-GAN: training on the trainingData rows: D_y, D_z {config.classifier_epochs} epochs; G, D "
        f"{config.epochs} epochs per margin fraction {list(config.margin_fractions)}; Acc(D_y) threshold "
        f"{config.utility_threshold:g}")
    return train_run("prgan", DATASET, data_path=DATA_PATH, out=out / "runs" / "prgan", dataset_options=options,
                     config=config, attacker_epochs=args.attacker_epochs)


def one_mechanism(name: str, out: Path, options: dict, args) -> dict:
    from sensorveil.export import export_run
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.runs import read_run

    started = time.time()
    run_dir = (train_pass if name == "pass" else train_prgan)(out, options, args)
    run = read_run(run_dir)
    log(f"{LABELS[name]}: trained in {run.get('train_seconds') or 0:.0f} s; exporting the ONNX bundle")
    bundle = export_run(run_dir, "onnx", out / "bundles" / name)
    log(f"{LABELS[name]}: auditing the bundle on the {rows_text(options, test=True)} ({args.audit_seeds} seed(s), "
        f"{args.attacker_epochs} attacker epochs)")
    device = audit_path(bundle, seeds=args.audit_seeds, attacker_epochs=args.attacker_epochs,
                        log=lambda line: log(f"{LABELS[name]}: {line}"))
    entry = {"mechanism": name, "config": run["config"], "dataset_record": run["dataset"],
             "reference": run["reference"], "bundle_evaluation": device,
             "goal": verdict(device["useful"], device["private"], device["random_star"]),
             "train_seconds": run.get("train_seconds"), "seconds": round(time.time() - started, 1),
             "run_dir": str(run_dir), "bundle": str(bundle), "timestamp": stamp()}
    if name == "pass":
        entry["pass_set"] = pass_settings(args.pass_set, args.quick)
        entry["training"] = {k: v for k, v in run["training"].items() if k != "history"}
        entry["run_metrics"] = {k: v for k, v in run["metrics"].items() if k != "confusion"}
    else:
        entry["selection"] = run["selection"]
    return entry


def raw_reference(options: dict, args) -> dict:
    """A neural floor classifier and the region attackers (neural, trees) trained on the RAW trainingData rows and
    scored on the raw validationData rows, over the audit's seeds: what the split leaves of utility and privacy
    before any mechanism."""
    from sensorveil.sdk.audit import Release, attack
    from sensorveil.sdk.audit import interval as with_interval
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.evaluation import baselines
    from sensorveil.sdk.mechanisms.base import protocol_task

    started = time.time()
    task = protocol_task(load_dataset(DATASET, DATA_PATH, **options), USEFUL, PRIVATE, seed=0)
    raw = Release(task, task.x[task.attacker_train], task.x[task.test])
    n_test, seeds, epochs = len(task.test), range(args.audit_seeds), args.attacker_epochs

    def over_seeds(label, family, labels, classes, offset=0):
        log(f"raw data: {label} ({family}), {args.audit_seeds} seed(s)")
        truth = labels[task.test]
        return with_interval([float((attack(family, raw, labels, classes, epochs, offset + seed) == truth).mean())
                              for seed in seeds], n_test)

    floor = over_seeds("floor classifier", "neural", task.useful, task.n_useful, offset=100)
    private = {family: over_seeds("region attacker", family, task.private, task.n_private)
               for family in ("neural", "trees")}
    reference = baselines(task)
    return {"n_train": int(len(task.attacker_train)), "n_validation": n_test, "floor_acc": floor,
            "private": private, "majority_private": reference["majority_private"],
            "goal": verdict(floor, private, reference["random_star"]), "attacker_epochs": epochs,
            "seeds": args.audit_seeds, "seconds": round(time.time() - started, 1), "timestamp": stamp()}


# ------------------------------------------------------------------ the page
def settings_text(entry: dict) -> str:
    config = entry["config"]
    if entry["mechanism"] == "pass":
        training = entry["training"]
        return (f"PASS: {', '.join(f'{k}={v}' for k, v in entry['pass_set'].items())} (given to `--set`); lambda "
                f"{training['lambda']:g}, mu {training['mu']:g}, substitute bank {training['bank_size']} rows, "
                f"{training['epochs']} epochs, input_dropout {config.get('input_dropout', 0):g}; the rest "
                "PASSConfig's defaults, as scripts/pass_results.py trains it")
    selection = entry["selection"]
    chosen = selection["sweep"][selection["chosen"]]
    return (f"PR-GAN: D_y, D_z {config['classifier_epochs']} epochs; G, D {config['epochs']} epochs per margin "
            f"fraction {list(config['margin_fractions'])}; chosen {chosen['margin_fraction']:g} (c = "
            f"{selection['margin_c']:.2f}); Acc(D_y) threshold {config['utility_threshold']:.2f} "
            f"{'met' if selection['threshold_met'] else 'NOT met'} on the held-out part of the training rows; as "
            "scripts/prgan_results.py configures it")


def table_row(label: str, goal: dict, reference: bool = False) -> str:
    """One release's line; the raw data's is the reference: it has no privacy to keep and no goal."""
    verdict_cell = "(reference)" if reference else "**met**" if goal["met"] else "NOT met"
    return (f"| {label} | {interval(goal['floor_acc'])} | {goal['strongest_attacker']}: "
            f"{interval(goal['strongest_acc'])} | {pct(goal['random_star'])} | {goal['gap_points']:+.1f} "
            f"| {'yes' if goal['utility_at_least_75'] else 'NO'} "
            f"| {'-' if reference else 'yes' if goal['privacy_kept'] else 'NO'} | {verdict_cell} |")


def summary_lines(results: dict) -> list:
    lines = ["| release | floor accuracy [95%] | strongest region attacker [95%] | Random* "
             "| strongest - Random* (points) | floor >= 75% | privacy kept | goal |",
             "|---|---:|---|---:|---:|---|---|---|"]
    raw = results.get("raw")
    if raw:
        lines.append(table_row("raw data (no mechanism)", raw["goal"], reference=True))
    for name, entry in results["mechanisms"].items():
        lines.append(table_row(f"{LABELS.get(name, name)} bundle", entry["goal"]))
    return lines + [""]


def audit_lines(name: str, entry: dict) -> list:
    device = entry["bundle_evaluation"]
    star = device["random_star"]
    lines = [f"### {LABELS.get(name, name)}", "", para(f"{settings_text(entry)}. Trained in "
                                                      f"{entry.get('train_seconds') or 0:.0f} s, whole step "
                                                      f"{entry['seconds']:.0f} s; computed {entry['timestamp']}."),
             "", f"| attacker on the bundle's output ({device.get('backend', '?')}) | region accuracy [95%] "
             "| minus Random* (points) |", "|---|---:|---:|"]
    lines += [f"| {family} | {interval(figure)} | {100 * (figure['mean'] - star):+.1f} |"
              for family, figure in device["private"].items()]
    lines += [f"| utility probe: floor classifier | {interval(device['useful'])} | |", f"| Random* | {pct(star)} | |",
              "", para(f"The audit's own verdict: {device.get('verdict', '?')} (raw-data strongest region attacker "
                       f"{device.get('power', {}).get('raw_strongest_attacker', '?')} "
                       f"{pct(device.get('power', {}).get('raw_strongest_accuracy'))}, one seed)."), ""]
    return lines


def goal_lines(results: dict) -> list:
    verdicts = [f"{LABELS.get(name, name)} {'meets' if entry['goal']['met'] else 'does NOT meet'} it"
                for name, entry in results["mechanisms"].items()]
    met = [name for name, entry in results["mechanisms"].items() if entry["goal"]["met"]]
    return [para(f"**Goal** ({GOAL}): {'; '.join(verdicts) or 'no mechanism ran'}. "
                 f"**{'Met' if met else 'Not met'}**{' by ' + ', '.join(LABELS.get(m, m) for m in met) if met else ''}"
                 "."), ""]


def markdown(results: dict) -> str:
    """docs/uji_validation.md from the JSON this script writes: nothing here is measured."""
    from sensorveil.benchmarks.report import cpu_text

    host = cpu_text(results["cpu"]) if results.get("cpu") else None
    raw = results.get("raw") or {}
    quick = " **Made with --quick: tiny settings, the figures mean nothing.**" if results.get("quick") else ""
    options = ", ".join(f"{k}={v}" for k, v in results.get("dataset_options", {}).items())
    lines = ["# UJIIndoorLoc's validation rows: utility that survives new users and phones", "",
             para(page_header(recorded(results, host=host))), "",
             para(f"Every figure below is read from docs/uji_validation.json, which `{COMMAND}` writes: it trains "
                  "PASS and PR-GAN on UJIIndoorLoc's trainingData.csv only and scores everything on exactly the "
                  f"{raw.get('n_validation', '?')} rows of validationData.csv (loader options: {options}), "
                  "fingerprints taken by other users and phones months later; it exports each mechanism's ONNX "
                  "bundle and audits it as the device runs it. "
                  f"`{COMMAND} --render-only` rewrites this page from that JSON without training.{quick}"), "",
             para("*Floor accuracy*: a neural classifier trained on the release of the "
                  f"{raw.get('n_train', '?')} training rows with the true floor labels and scored on the release of "
                  "the validation rows (the audit's utility probe; for raw data, on the raw rows). *Strongest region "
                  "attacker*: the family with the highest mean accuracy among the audit's attackers (neural, trees, "
                  "logistic, trees given the floor, and each mechanism's own), each trained on the released training "
                  f"rows with the true region labels, over {results.get('audit_seeds', '?')} seed(s) of "
                  f"{results.get('attacker_epochs', '?')} epochs, mean with its 95% interval. *Random\\**: the best "
                  "guess of the region from the floor and the public prior (8 regions of a floor, equal in the "
                  "training rows). The goal reads the means. Figures are percentages."), "",
             f"**Goal**: {GOAL}.", "", "## Summary", ""]
    lines += summary_lines(results) + goal_lines(results)
    if raw:
        lines += [para(f"The raw-data row: the same classifiers on the raw rows (neural floor classifier; region "
                       f"attackers neural {interval(raw['private']['neural'])} and trees "
                       f"{interval(raw['private']['trees'])}), computed {raw['timestamp']}. It bounds the utility a "
                       "release can keep on these rows and shows that the region attackers have power here."), ""]
    lines += selection_lines(results) + ["## Each bundle's audit on the validation rows", ""]
    for name, entry in results["mechanisms"].items():
        lines += audit_lines(name, entry)
    lines += sweep_lines(results)
    lines += ["## The command", "", "```bash", recorded(results).get("command", COMMAND), "```", "",
              para(f"Settings of PASS are given with `--pass-set KEY=VALUE ...` (PASSConfig's fields, as `sensorveil "
                   f"train pass --set` takes them; this script starts from "
                   f"{', '.join(f'{k}={v}' for k, v in PASS_DEFAULTS.items())}); `--select KEY=V1,V2,...` first "
                   "chooses one of them on held-out trainingData users; `--mechanisms pass` reruns PASS alone and "
                   "keeps PR-GAN's entry.")]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ the command
def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    parser.add_argument("--pass-set", nargs="+", default=None, metavar="KEY=VALUE",
                        help=f"PASS settings (PASSConfig fields) over {PASS_DEFAULTS}")
    parser.add_argument("--select", default=None, metavar="KEY=V1,V2,...",
                        help="choose PASS's KEY among the values on held-out trainingData users, then run the page")
    parser.add_argument("--select-audit-seeds", type=int, default=1, help="audit seeds of each --select value")
    parser.add_argument("--attacker-epochs", type=int, default=20, help="each attacker's and classifier's epochs")
    parser.add_argument("--audit-seeds", type=int, default=AUDIT_SEEDS, help="the audit's and the reference's seeds")
    parser.add_argument("--out", default=str(REPO / "runs" / "uji-validation"), help="runs and bundles go here")
    parser.add_argument("--json", default=str(REPO / "docs" / "uji_validation.json"))
    parser.add_argument("--markdown", default=str(REPO / "docs" / "uji_validation.md"))
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny settings (max_rows={QUICK_ROWS}, 1 epoch, 1 seed; a test's run): figures mean "
                             "nothing")
    parser.add_argument("--render-only", action="store_true", help="rewrite --markdown from --json; train nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    return parser.parse_args()


def run_all(args, json_path: Path) -> dict:
    """The reference and each mechanism's run, export and audit; the JSON written after each (partial results
    survive)."""
    if not DATA_PATH.is_file():
        raise SystemExit(f"{TAG} {DATA_PATH} not found (set SENSORVEIL_SHARED to the folder holding "
                         "datasets/ujiindoorloc.zip)")
    require_clean(args.allow_dirty)
    if args.select and "pass" not in args.mechanisms:
        raise SystemExit(f"{TAG} --select chooses a PASS setting: it needs pass among --mechanisms")
    if args.quick:
        args.attacker_epochs, args.audit_seeds, args.select_audit_seeds = 1, 1, 1
    from sensorveil.benchmarks.report import cpu_description

    record, out, options = provenance(allow_dirty=args.allow_dirty), Path(args.out), dataset_options(args.quick)
    earlier = json.loads(json_path.read_text()) if json_path.is_file() else {}
    results = {"generated_by": "scripts/uji_validation_results.py", "cpu": cpu_description(), "provenance": record,
               "timestamp": stamp(), "goal": GOAL, "quick": args.quick, "dataset_options": options,
               "attacker_epochs": args.attacker_epochs, "audit_seeds": args.audit_seeds,
               "mechanisms": {name: entry for name, entry in earlier.get("mechanisms", {}).items()
                              if name not in args.mechanisms},
               "pass_sweep": earlier.get("pass_sweep", []),
               "pass_selection": None if "pass" in args.mechanisms else earlier.get("pass_selection")}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    log(f"goal: {GOAL}")
    if args.select:   # before any validationData row is loaded
        chosen_on = dataset_options(args.quick, SELECT_SPLIT)
        results["pass_selection"] = selection = select_setting(
            args, chosen_on, lambda name, trial: one_mechanism("pass", out / "select" / name, chosen_on, trial), log)
        args.pass_set = [*(args.pass_set or []), f"{selection['key']}={selection['chosen']}"]
        json_path.write_text(json.dumps(without_machine_paths(results, out), indent=2, default=float) + "\n")
    log("raw-data reference: floor classifier and region attackers on the raw rows")
    results["raw"] = raw_reference(options, args)
    for name in args.mechanisms:
        entry = one_mechanism(name, out, options, args)
        results["mechanisms"][name] = {**entry, "provenance": record}
        if name == "pass":
            results["pass_sweep"] = merged_sweep(results["pass_sweep"], sweep_point(entry, record, args.quick))
        results["mechanisms"] = {key: results["mechanisms"][key] for key in MECHANISMS if key in results["mechanisms"]}
        results = without_machine_paths(results, out)
        json_path.write_text(json.dumps(results, indent=2, default=float) + "\n")
        goal = entry["goal"]
        log(f"{LABELS[name]}: goal {'met' if goal['met'] else 'NOT met'} (floor {pct(goal['floor_acc']['mean'])}, "
            f"strongest {goal['strongest_attacker']} {goal['gap_points']:+.1f} points from Random*); "
            f"{entry['seconds']:.0f} s; wrote {json_path}")
    return results


def main() -> None:
    args = arguments()
    json_path, page = Path(args.json), Path(args.markdown)
    results = json.loads(json_path.read_text()) if args.render_only else run_all(args, json_path)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(markdown(results))
    log(f"wrote {page}")


if __name__ == "__main__":
    main()
