#!/usr/bin/env python
"""PR-GAN's own results page: the paper's figures beside ours, on the paper's measure and under probing attackers.

    python scripts/prgan_results.py [--datasets digits ujiindoorloc] [--uji-rows N] [--epochs N]
                                    [--attacker-epochs 20] [--out runs/prgan-results]
                                    [--json docs/prgan_results.json] [--markdown docs/prgan_results.md]
    python scripts/prgan_results.py --render-only   # rewrite the page from the JSON, train nothing

Per dataset, as the paper's protocol says (section 5.3, section 6.4): train the fixed D_y and D_z on slice 1, the
generator G against them and the GAN discriminator D on slice 2 (eq. 7-11) over a sweep of eq. 10's margin c, keep
the most private G whose Acc(D_y) stays at or above the threshold, and score it on slice 3. Then export its ONNX
bundle and audit it as the device runs it (sensorveil/sdk/audit.py: every attacker family over seeds, 95%
intervals, Random*), retrain D_y on the bundle's output and test it on clean data (Table 5's "Training" row), and
time the bundle. The page sets the paper's Table 2 and Table 5 figures (typed from the paper, labelled as the
paper's) beside ours on the same measure (the fixed D_z's and D_y's accuracy on perturbed test data) and beside
the probing attackers, which the paper does not run. Every figure of ours comes from this script's run, made with
scripts/make_results.py's building blocks (train_run, export_run, audit_path; the Table 2 figures, audit seeds and
depth margins of sensorveil_lab.prgan_pages); the page helpers and the timing are sensorveil_lab's (page_text,
pass_pages), as for scripts/pass_results.py.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sensorveil.benchmarks.report import cpu_description, cpu_text
from sensorveil.export import export_run
from sensorveil.sdk import mechanisms, runs
from sensorveil.sdk.assess import audit_path
from sensorveil_lab.page_text import interval, para, pct, where_from
from sensorveil_lab.pass_pages import runtime_row
from sensorveil_lab.prgan_pages import AUDIT_SEEDS, PAPER_TABLE2, prgan_config, without_machine_paths
from sensorveil_lab.provenance import page_header, provenance, recorded, require_clean
from sensorveil_lab.shared import SHARED

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/prgan_results.py"
DATASETS = ("digits", "ujiindoorloc", "synthetic-depth")
DEFAULT_DATASETS = ["digits", "ujiindoorloc"]
# Table 2 (Acc(D_z) at the Acc(D_y) threshold, PR-GAN / NGP / AP / DP rows, Random*, Original Acc) is typed in
# sensorveil_lab.prgan_pages' PAPER_TABLE2. Tables 3, 4 and 5, typed here from the paper (../shared/papers/prgan.md),
# for the paper's dataset each of ours stands in for. Table 5 (section 6.7): Acc(D_y) in %, "Inference" = the fixed
# D_y on PR-GAN's perturbed test data (section 6.4's run), "Training" = a D_y trained on perturbed data and tested on
# clean data of a separate slice. Table 3 (section 6.3): G's FLOP and parameters. Table 4: G's frames (WiFi:
# inputs) per second measured on a GeForce GTX 1080 Ti (the paper's other columns are estimates from it).
PAPER_MORE = {   # as the paper prints them (Table 5 with two decimals)
    "digits": {"inference": "95.19", "training": "96.72", "flop": "1.6M", "params": "235.4K", "fps": "22.1K"},
    "ujiindoorloc": {"inference": "79.80", "training": "72.06", "flop": "2.1M", "params": "1.1M", "fps": "36.0K"},
    "synthetic-depth": {"inference": "99.82", "training": "99.73", "flop": "96.4M", "params": "420.3K",
                        "fps": "595.8"},
}
DESCRIPTIONS = {
    "digits": "scikit-learn's 8x8 handwritten digits (1,797 images; the paper's MNIST has 70,000 of 28x28)",
    "ujiindoorloc": "UJIIndoorLoc Wi-Fi fingerprints, 520 access points heard / not heard (the paper's WiFi data)",
    "synthetic-depth": "synthetic overhead depth frames (sensorveil's generator; the paper's OccuTherm is real)",
}
# how each of our datasets stands in for the paper's (section 6.1)
STAND_INS = {
    "digits": "scikit-learn's 8x8 digits stand in for MNIST: the same task (parity useful, digit < 5 private) and "
              "the same prior theta (0.4 / 0.6), so the same Random* of about 60%, on 1,797 small images instead of "
              "70,000",
    "ujiindoorloc": "UJIIndoorLoc is the paper's WiFi dataset: the same 21,048 fingerprints binarised, floor (13) "
                    "useful and region (104) private with 8 regions per floor; sensorveil cuts those regions at "
                    "longitude and latitude quantiles, as the paper does not say how it cuts them",
    "synthetic-depth": "synthetic depth frames stand in for OccuTherm: facing useful and identity private as there, "
                       "but drawn by sensorveil's generator, not recorded, so compare shapes, not values",
}


def training_utility(run_dir: Path, run: dict, bundle: Path, epochs: int) -> float:
    """Table 5's "Training" row (section 6.7): D_y's architecture trained on the bundle's output for slices 1 and 2
    (as the device emits it), tested on clean slice 3."""
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.mechanisms.sanitizer import cas  # trained on released data, tested on raw data

    release = mechanisms.get("prgan").release(run_dir, run, Privatizer.load(bundle, backend="auto"))
    task = release.task
    return cas(task, release.train, task.useful, task.n_useful, epochs, run["seed"])


def one_dataset(name: str, out: Path, args) -> dict:
    data_path = Path(args.uji) if name == "ujiindoorloc" else None
    if data_path is not None and not data_path.is_file():
        return {"skipped": f"{data_path} not found (set SENSORVEIL_SHARED or pass --uji)"}
    started, config = time.time(), prgan_config(name, args)
    options = {"max_rows": args.uji_rows} if name == "ujiindoorloc" and args.uji_rows else None
    print(f"[{name}] 1/5 train PR-GAN (section 5.3): D_y, D_z on slice 1 ({config.classifier_epochs} epochs); G, D "
          f"on slice 2 ({config.epochs} epochs) per margin fraction {list(config.margin_fractions)}", flush=True)
    run_dir = runs.train_run("prgan", name, data_path=data_path, out=out / "runs" / f"prgan-{name}",
                             dataset_options=options, config=config, attacker_epochs=args.attacker_epochs)
    run = runs.read_run(run_dir)
    print(f"[{name}] 2/5 export the ONNX bundle ({time.time() - started:.0f} s in)", flush=True)
    bundle = export_run(run_dir, "onnx", out / "bundles" / f"prgan-{name}")
    manifest = json.loads((bundle / "manifest.json").read_text())
    print(f"[{name}] 3/5 audit the bundle: every attacker family, {args.audit_seeds} seeds, "
          f"{args.attacker_epochs} epochs ({time.time() - started:.0f} s in)", flush=True)
    device = audit_path(bundle, seeds=args.audit_seeds, attacker_epochs=args.attacker_epochs,
                        log=lambda line: print(f"[{name}] {line}", flush=True))
    print(f"[{name}] 4/5 Table 5's training utility: D_y trained on the bundle's output, tested on clean data "
          f"({time.time() - started:.0f} s in)", flush=True)
    trained = training_utility(run_dir, run, bundle, config.classifier_epochs)
    print(f"[{name}] 5/5 time the bundle (onnxruntime, batch 1; {time.time() - started:.0f} s in)", flush=True)
    return {"dataset": name, "useful": run["useful"], "private": run["private"], "dataset_record": run["dataset"],
            "config": run["config"], "selection": run["selection"], "reference": run["reference"],
            "run_metrics": run["metrics"], "bundle_evaluation": device, "training_utility": trained,
            "complexity": manifest.get("complexity"), "validation": manifest.get("validation"),
            "runtime": runtime_row(bundle), "train_seconds": run.get("train_seconds"),
            "seconds": round(time.time() - started, 1), "run_dir": str(run_dir), "bundle": str(bundle)}


# ------------------------------------------------------------------ the page
def human(count) -> str:
    """1253376 -> 1.3M, as the paper's Table 3 writes sizes."""
    if count is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            return f"{count / scale:.1f}{suffix}"
    return str(count)


def paper_label(name: str) -> str:
    return PAPER_TABLE2.get(name, {}).get("paper_dataset", "no counterpart")


SUMMARY_HEAD = ["| dataset (paper's) | private / useful | Acc(D_y) threshold | Acc(D_z): paper (Table 2) / ours "
                "| Acc(D_y): paper (Table 5) / ours | Random*: paper / ours | strongest probing attacker on the "
                "bundle [95%] | goal: privacy / utility / power |", "|---|---|---:|---:|---:|---:|---|---|"]
UTILITY_MARGIN = 0.05     # the bundle's utility probe at most 5 points under the same probe on raw rows


def goal_parts(device: dict) -> dict:
    """The goal every mechanism's page states, each part named: privacy (the strongest attacker within 5 points
    of Random*), utility (the utility probe at most 5 points under the raw rows'), power (the raw rows' strongest
    attacker more than 5 points above Random*); "met" only when all hold, "no power" where the audit has none. An
    audit from before the raw rows' utility probe has no utility part: "not measured", and no "met"."""
    raw_useful, power = device.get("raw_useful"), device.get("power") or {}
    parts = {"privacy": device["goal"]["strongest_within_5_points_of_random_star"],
             "utility": None if raw_useful is None else
             device["useful"]["mean"] >= raw_useful["mean"] - UTILITY_MARGIN,
             "power": power.get("has_power")}
    verdict = ("no power" if parts["power"] is False else "not met" if False in parts.values() else
               "met" if all(parts.values()) else
               "no verdict (" + ", ".join(name for name, held in parts.items() if held is None) + " not measured)")
    return {**parts, "verdict": verdict}


def parts_text(parts: dict) -> str:
    mark = {True: "yes", False: "NO", None: "-"}
    return " / ".join(mark[parts[name]] for name in ("privacy", "utility", "power")) + f": {parts['verdict']}"


def summary_row(name: str, entry: dict) -> str:
    """One dataset's line of the summary: the paper's figure / ours (on the bundle) per measure."""
    if "skipped" in entry:
        return f"| {name} | skipped: {entry['skipped']} |" + " |" * 6
    table2, more = PAPER_TABLE2.get(name, {}), PAPER_MORE.get(name, {})
    device, ref = entry["bundle_evaluation"], entry["reference"]
    strongest = device["strongest_attacker"]
    cells = [f"{name} ({paper_label(name)})", f"{entry['private']} / {entry['useful']}",
             f"{ref['utility_threshold']:.2f}", f"{table2.get('prgan', '-')} / {pct(device['protocol_acc_private'])}",
             f"{more.get('inference', '-')} / {pct(device['protocol_acc_useful'])}",
             f"{table2.get('random_star', '-')} / {pct(ref['random_star'])}",
             f"{strongest}: {interval(device['private'][strongest])}", parts_text(goal_parts(device))]
    return "| " + " | ".join(cells) + " |"


def setting_text(name: str, entry: dict) -> str:
    config, selection, metrics = entry["config"], entry["selection"], entry["run_metrics"]
    cap = entry.get("dataset_record", {}).get("options", {}).get("max_rows")
    chosen = selection["sweep"][selection["chosen"]]
    return (f"{DESCRIPTIONS.get(name, name)}{f', capped at {cap} rows (--uji-rows)' if cap else ''}; "
            f"{where_from(entry)}. Section 5.3's three slices: the fixed D_y and D_z learn from slice 1, G and D from "
            f"slice 2 (a fifth held out to choose c), {metrics['n_test']} test rows in slice 3; the probing attackers "
            f"learn from the {metrics['n_attacker_train']} rows of slices 1 and 2. D_y and D_z "
            f"{config['classifier_epochs']} epochs; G and D {config['epochs']} epochs per margin; eq. 11's alpha "
            f"{config['alpha']:g}, beta {config['beta']:g}. Section 6.4's choice: margin fraction "
            f"{chosen['margin_fraction']:g} (c = {selection['margin_c']:.2f}), Acc(D_y) threshold "
            f"{config['utility_threshold']:.2f} {'met' if selection['threshold_met'] else 'NOT met'} on the held-out "
            f"part of slice 2. Trained in {entry.get('train_seconds') or 0:.0f} s; one training seed.")


def paper_measure_lines(name: str, entry: dict) -> list:
    """Table 2 and Table 5, the paper's figures beside ours on the same measure."""
    table2, more = PAPER_TABLE2.get(name, {}), PAPER_MORE.get(name, {})
    run, device, ref = entry["run_metrics"], entry["bundle_evaluation"], entry["reference"]
    rows = [("Acc(D_z): fixed sensitive classifier on perturbed test data (Table 2, PR-GAN row)", table2.get("prgan"),
             pct(run["protocol_acc_private"]), pct(device["protocol_acc_private"])),
            ("Acc(D_y): fixed target classifier on perturbed test data (Table 5, Inference)", more.get("inference"),
             pct(run["protocol_acc_useful"]), pct(device["protocol_acc_useful"])),
            ("D_y trained on perturbed data, tested on clean data (Table 5, Training)", more.get("training"),
             "", pct(entry.get("training_utility"))),
            ("Random*: a guess of z from y and the prior theta_y(z) (Table 2)", table2.get("random_star"),
             pct(ref["random_star"]), ""),
            ("Original Acc(D_z), raw test data (Table 2)", table2.get("original_acc_private"),
             pct(ref["original_acc_private"]), ""),
            ("Original Acc(D_y), raw test data (Table 2)", table2.get("original_acc_useful"),
             pct(ref["original_acc_useful"]), "")]
    lines = [f"The paper's measure, the paper's {paper_label(name)} figures beside ours (%):", "",
             f"| figure | paper ({paper_label(name)}) | ours: trained G | ours: exported bundle "
             f"({device.get('backend', '?')}) |", "|---|---:|---:|---:|"]
    lines += [f"| {label} | {'-' if paper is None else paper} | {trained} | {bundle} |"
              for label, paper, trained, bundle in rows]
    if table2:
        lines += ["", para(f"The paper's baselines at the same threshold (Table 2, Acc(D_z)): NGP {table2['ngp']}, AP "
                           f"{table2['ap']}, DP {table2['laplace']}; ours are measured on docs/results.md.")]
    return lines + [""]


def audit_lines(entry: dict) -> list:
    """The probing attackers on the bundle's output (ours: the paper runs none)."""
    device, run = entry["bundle_evaluation"], entry["run_metrics"]
    star = device["random_star"]
    lines = [para(f"Probing attackers (ours; the paper has none): each trains on the exported bundle's output for "
                  f"slices 1 and 2 with the true {entry['private']} labels ({device.get('attacker_epochs', '?')} "
                  f"epochs, {device['seeds']} seeds, `sensorveil evaluate`'s audit) and is scored on its output for "
                  "slice 3; mean with its 95% interval."), "",
             f"| attacker | accuracy on {entry['private']} [95%] | minus Random* (points) | raw rows, no mechanism "
             "(one seed) |", "|---|---:|---:|---:|"]
    raw = device.get("raw_private", {})
    lines += [f"| {family} | {interval(figure)} | {100 * (figure['mean'] - star):+.1f} | "
              f"{interval(raw[family]) if family in raw else '-'} |" for family, figure in device["private"].items()]
    raw_useful = device.get("raw_useful")
    lines += [f"| utility probe: the same on {entry['useful']} | {interval(device['useful'])} | | "
              f"{interval(raw_useful) if raw_useful else 'not measured'} |",
              f"| Random* | {pct(star)} | | |", "",
              para(f"Strongest: {device['strongest_attacker']}. Goal, privacy / utility (probe at most "
                   f"{UTILITY_MARGIN * 100:g} points under the raw rows') / power (raw rows' strongest more than 5 "
                   f"points above Random*): {parts_text(goal_parts(device))}"
                   f". The training run's own one-seed attackers, on the trained G: neural "
                   f"{pct(run.get('probing_acc_private'))}, trees {pct(run.get('tree_acc_private'))}; mean L2 "
                   f"distortion {run.get('distortion_l2', 0):.2f} (model units)."), ""]
    return lines


def sweep_lines(entry: dict) -> list:
    selection = entry["selection"]
    lines = ["Section 6.4's sweep of eq. 10's margin c, scored by the fixed classifiers on the held-out part of "
             "slice 2:", "", "| margin fraction | c | Acc(D_y) | Acc(D_z) | chosen |", "|---:|---:|---:|---:|---|"]
    lines += [f"| {point['margin_fraction']:g} | {point['margin_c']:.2f} | {pct(point['val_acc_useful'])} "
              f"| {pct(point['val_acc_private'])} | {'yes' if index == selection['chosen'] else ''} |"
              for index, point in enumerate(selection["sweep"])]
    return lines + [""]


def size_lines(name: str, entry: dict, cpu: str) -> list:
    """Tables 3 and 4 beside the bundle's size and speed."""
    more, complexity, runtime = PAPER_MORE.get(name, {}), entry.get("complexity") or {}, entry.get("runtime") or {}
    flops = complexity.get("flops_onnx") or complexity.get("flops_torch")
    fps = runtime.get("fps")
    lines = [f"G's size and speed (Tables 3 and 4; the paper's on {paper_label(name)}):", "",
             "| figure | paper | ours (the exported bundle) |", "|---|---:|---:|",
             f"| parameters (Table 3) | {more.get('params', '-')} | {human(complexity.get('params'))} |",
             f"| FLOP (Table 3) | {more.get('flop', '-')} | {human(flops)} |",
             f"| outputs per second (Table 4) | {more.get('fps', '-')} on a GTX 1080 Ti GPU "
             f"| {'-' if fps is None else f'{fps:.0f}'} on {cpu}, onnxruntime batch 1 |"]
    checks = [check.get("message", check.get("status", "")) for check in entry.get("validation") or []]
    if checks:
        lines += ["", para(f"ONNX export validated against torch: {'; '.join(checks)}.")]
    return lines + [""]


def dataset_section(name: str, entry: dict, cpu: str) -> list:
    if "skipped" in entry:
        return [f"## {name}", "", f"Skipped: {entry['skipped']}.", ""]
    return ([f"## {name} (the paper's {paper_label(name)}): private {entry['private']}, useful {entry['useful']}", "",
             para(setting_text(name, entry)), ""]
            + paper_measure_lines(name, entry) + audit_lines(entry) + sweep_lines(entry) + size_lines(name, entry, cpu))


def relation_lines(datasets: dict) -> list:
    ours = [STAND_INS.get(name, f"{name} has no counterpart in the paper") for name, entry in datasets.items()
            if "skipped" not in entry]
    return ["## How these figures relate to the paper's", "",
            para(f"{'; '.join(ours) or 'No dataset ran'}. Our networks follow Table 1 scaled to our inputs; Table "
                 "3's rows show how G's size differs. The paper gives one figure per cell and no spread; ours are one "
                 "training seed, and only the audit's attackers are repeated over seeds."), "",
            para("The paper's privacy measure is Acc(D_z), the accuracy of the sensitive classifier that G was "
                 "trained to fool (Table 2). A fresh attacker that learns from G's output is not bound by what fooled "
                 "D_z: the probing attackers' accuracy, not Acc(D_z), is what a deployment of the bundle can rely on, "
                 "and the distance between the two is the finding to read on this page."), ""]


TITLE = "# PR-GAN: the paper's Table 2 and Table 5 beside ours, and probing attackers on the exported bundle"
INTRO = ("Every figure below except the paper's own is read from the JSON that `{command}` writes "
         "(docs/prgan_results.json): per dataset it trains PR-GAN as the paper's sections 5.3 and 6.4 say, exports G's "
         "ONNX bundle, audits it, retrains D_y on its output and times it. `{command} --render-only` rewrites this "
         "page from that JSON without training. A run given --datasets keeps the other datasets' earlier entries, so "
         "each section says when its figures were computed. The paper's figures are typed from the paper and always "
         "labelled as the paper's; accuracies are in %.")
MEASURES = ("*Acc(D_z)*, *Acc(D_y)*: the paper's measure, the fixed sensitive and target classifiers (trained on raw "
            "slice 1, never retrained) on perturbed test data. *Probing attacker*: ours, a classifier trained on "
            "perturbed data with the true private labels. *Random\\**: the paper's floor, a guess of z from the "
            "published y and the prior theta_y(z).")


def markdown(results: dict) -> str:
    """docs/prgan_results.md from the JSON this script writes: nothing here is measured."""
    host = cpu_text(results["cpu"]) if results.get("cpu") else None   # None: the header says "not recorded"
    lines = [TITLE, "", para(page_header(recorded(results, host=host))), "", para(INTRO.format(command=COMMAND)), "",
             para(MEASURES), "", "## Summary", "", *SUMMARY_HEAD,
             *[summary_row(name, entry) for name, entry in results["datasets"].items()], ""]
    for name, entry in results["datasets"].items():
        lines += dataset_section(name, entry, host or "a CPU not recorded")
    return "\n".join(lines + relation_lines(results["datasets"]))


# ------------------------------------------------------------------ the command
def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DEFAULT_DATASETS, choices=DATASETS)
    parser.add_argument("--uji", default=str(SHARED / "datasets" / "ujiindoorloc.zip"), help="the UJIIndoorLoc zip")
    parser.add_argument("--uji-rows", type=int, default=None, help="a region-stratified cap on UJIIndoorLoc's rows")
    parser.add_argument("--epochs", type=int, default=None, help="G and D epochs per margin (default: 30)")
    parser.add_argument("--classifier-epochs", type=int, default=None, help="the fixed D_y / D_z's (default: 20)")
    parser.add_argument("--attacker-epochs", type=int, default=20, help="each probing attacker's epochs")
    parser.add_argument("--audit-seeds", type=int, default=AUDIT_SEEDS, help="the bundle audit's seeds")
    parser.add_argument("--out", default=str(ROOT / "runs" / "prgan-results"), help="runs and bundles go here")
    parser.add_argument("--json", default=str(ROOT / "docs" / "prgan_results.json"))
    parser.add_argument("--markdown", default=str(ROOT / "docs" / "prgan_results.md"))
    parser.add_argument("--render-only", action="store_true", help="rewrite --markdown from --json; train nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    return parser.parse_args()


def render(results: dict, page: Path) -> None:
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(markdown(results) + "\n")
    print(f"wrote {page}")


def main() -> None:
    args = arguments()
    json_path, page = Path(args.json), Path(args.markdown)
    if args.render_only:
        render(json.loads(json_path.read_text()), page)
        return
    require_clean(args.allow_dirty)
    record, out = provenance(allow_dirty=args.allow_dirty), Path(args.out)
    # datasets not named this time keep their figures from the file (each entry says when it was computed)
    earlier = json.loads(json_path.read_text())["datasets"] if json_path.is_file() else {}
    results = {"generated_by": "scripts/prgan_results.py", "cpu": cpu_description(), "provenance": record,
               "datasets": {name: entry for name, entry in earlier.items() if name not in args.datasets}}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for name in args.datasets:
        print(f"== PR-GAN on {name}", flush=True)
        entry = one_dataset(name, out, args)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results["datasets"][name] = {**entry, "timestamp": stamp, "provenance": record}
        results = without_machine_paths(results, out)
        json_path.write_text(json.dumps(results, indent=2) + "\n")   # partial results survive
        print(f"[{name}] done in {entry.get('seconds', 0)} s; wrote {json_path}", flush=True)
    render(results, page)


if __name__ == "__main__":
    main()
