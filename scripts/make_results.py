#!/usr/bin/env python
"""Regenerate docs/results.md: PR-GAN and its Table 2 baselines on digits (the paper's MNIST toy)
and UJIIndoorLoc (the paper's WiFi experiment), each figure measured by this script's run.

    python scripts/make_results.py [--uji PATH] [--out runs/results] [--quick]

For each dataset: train PR-GAN (run directory), export its ONNX bundle and attack the bundle
through the runtime; then train NGP and AP and sweep the Laplace mechanism against the SAME fixed
D_y / D_z and splits; evaluate all with the paper's protocol and with the probing attack.
The paper's own Table 2 numbers are quoted beside ours for comparison (they are the paper's).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from sensorveil.export import export_run
from sensorveil.sdk import runs
from sensorveil.sdk.assess import audit_path
from sensorveil.sdk.audit import interval
from sensorveil.sdk.evaluation import evaluate
from sensorveil.sdk.mechanisms import prgan
from sensorveil.sdk.training import apply, snap_to_sensor
from sensorveil_lab.prgan_pages import AUDIT_SEEDS, DEPTH_MARGINS, PAPER_TABLE2, datasets_of
from sensorveil_lab.provenance import code_version, page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
LABELS = {"prgan": "PR-GAN", "ngp": "NGP", "ap": "AP", "laplace": "DP (Laplace)"}
BASELINES = ("ngp", "ap", "laplace")


def run_dataset(name: str, data_path, out: Path, quick: bool, margins=None, baselines=BASELINES,
                reuse_run: bool = False) -> dict:
    threshold = runs.DEFAULT_TASKS[name][2]
    config = prgan.default_config(name, threshold)
    if margins:   # fewer sweep points for the 180x180 depth models, which are slow to train on 2 cores
        config.margin_fractions = tuple(margins)
    if quick:   # a smoke version of the whole pipeline, for checking the script itself
        config = prgan.PRGANConfig(epochs=2, classifier_epochs=2, margin_fractions=(0.2,), utility_threshold=threshold)
    options = {}
    started = time.time()
    run_dir = out / f"prgan-{name}"
    if not (reuse_run and (run_dir / runs.RUN_FILE).is_file()):   # a finished run: keep its training
        run_dir = runs.train_run("prgan", name, data_path=data_path, out=run_dir, dataset_options=options,
                                 config=config)
    run = runs.read_run(run_dir)
    bundle = export_run(run_dir, "onnx", out / "bundles" / f"prgan-{name}")
    print(f"[{name}] auditing the bundle over {AUDIT_SEEDS} seeds", flush=True)
    device = audit_path(bundle, seeds=AUDIT_SEEDS,   # every attacker family, 95% intervals
                        log=lambda line: print(f"[{name}] {line}", flush=True))
    methods = {"prgan": {**run["metrics"], "selection": summary_of(run["selection"])}}
    exp = prgan.reload_experiment(run_dir, run)
    for variant in [b for b in ("ngp", "ap") if b in baselines]:
        G, selection = prgan.fit_variant(exp, variant)
        methods[variant] = {**evaluate(exp.task, lambda x, G=G: snap_to_sensor(apply(G, x), exp.step), exp.fixed,
                                       seed=run["seed"]),
                            "selection": summary_of(selection)}
    if "laplace" in baselines:
        epsilon, selection = prgan.fit_laplace(exp)
        methods["laplace"] = {**evaluate(exp.task, prgan.laplace_privatize(1.0 / epsilon, step=exp.step),
                                         exp.fixed, seed=run["seed"]),
                              "selection": summary_of(selection)}
    return {"dataset": name, "useful": run["useful"], "private": run["private"], "reference": run["reference"],
            "output_dtype": run["output"]["dtype"],
            "methods": methods, "bundle": str(bundle), "bundle_evaluation": device,
            "bundle_complexity": json.loads((bundle / "manifest.json").read_text())["complexity"],
            "seconds": round(time.time() - started, 1)}


def cached_or_run(name: str, data_path, out: Path, quick: bool, reuse: bool, margins=None,
                  baselines=BASELINES, reuse_run: bool = False) -> dict:
    """Each dataset's figures are saved as soon as they exist, so a long UJIIndoorLoc run that is
    interrupted does not cost the digits figures (--reuse picks them up again)."""
    cache = out / f"results-{name}.json"
    if reuse and cache.is_file():
        return json.loads(cache.read_text())
    if reuse:   # no run of this checkout: the figures on the page now (each carries its code version)
        published = ROOT / "docs" / "results.json"
        earlier = datasets_of(json.loads(published.read_text())) if published.is_file() else []
        found = next((r for r in earlier if r["dataset"] == name), None)
        if found:
            return found
    result = {**run_dataset(name, data_path, out, quick, margins, baselines, reuse_run),
              "code_version": code_version()}
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result, indent=2, default=str))
    return result


def summary_of(selection: dict) -> dict:
    keep = ("threshold_met", "margin_c", "epsilon")
    chosen = selection["sweep"][selection["chosen"]]
    return {**{k: selection[k] for k in keep if k in selection},
            "val_acc_useful": chosen["val_acc_useful"], "val_acc_private": chosen["val_acc_private"]}


def pct(value) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def interval_text(figure: dict) -> str:
    """An audit figure (mean, low, high) as '12.3 [10.1, 14.5]'."""
    return f"{pct(figure['mean'])} [{pct(figure['low'])}, {pct(figure['high'])}]"


def markdown(results: list[dict], record: dict, note: str = "") -> str:
    lines = ["# Results: PR-GAN and the Table 2 baselines", "", page_header(record), "",
             (note + "`docs/results.json` holds every figure below." if note else
              "Every figure below comes from that run (`docs/results.json` holds them all).")
             + " Accuracies in %, measured on slice 3 (test) of the paper's three-slice protocol (section 5.3).", "",
             "- **protocol Acc(D_z) / Acc(D_y)**: the defender's fixed classifiers on privatized test data "
             "(the paper's Table 2 measure).",
             "- **probing attacker**: a fresh classifier trained on privatized slices 1+2 with the true private "
             "labels, scored on privatized test data (neural: the D_z architecture; trees: 200 extra-trees). "
             "**utility probe**: the same for the useful attribute.",
             "- **Random\\***: the best guess of the private attribute from the useful one and the prior "
             "theta (argmax MED(z|y)), the floor any mechanism can reach.", ""]
    for result in results:
        paper, ref = PAPER_TABLE2[result["dataset"]], result["reference"]
        lines += [f"## {result['dataset']} (paper: {paper['paper_dataset']}): useful = {result['useful']}, "
                  f"private = {result['private']}, threshold Acc(D_y) >= {ref['utility_threshold']:.2f}", "",
                  "| method | paper Acc(D_z) | protocol Acc(D_z) | protocol Acc(D_y) | probing attacker (neural) "
                  "| probing attacker (trees) | utility probe | threshold met on validation | mean L2 distortion |",
                  "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
        for key, label in LABELS.items():
            m = result["methods"].get(key)
            if m is None:   # a baseline this run left out (--depth-baselines)
                lines.append(f"| {label} | {paper[key]} | not run on this data | | | | | | |")
                continue
            lines.append(
                f"| {label} | {paper[key]} | {pct(m['protocol_acc_private'])} | {pct(m['protocol_acc_useful'])} "
                f"| {pct(m['probing_acc_private'])} | {pct(m['tree_acc_private'])} | {pct(m['probing_acc_useful'])} "
                f"| {m['selection']['threshold_met']} | {m['distortion_l2']:.2f} |"
            )
        lines += [
            f"| Random* | {paper['random_star']} | {pct(ref['random_star'])} | | | | | | |",
            f"| Original Acc(D_z) | {paper['original_acc_private']} | {pct(ref['original_acc_private'])} | | | | | | |",
            f"| Original Acc(D_y) | {paper['original_acc_useful']} | | {pct(ref['original_acc_useful'])} | | | | | |",
            "",
        ]
        lines += bundle_lines(result)
        lines += quantization_note(result, result["bundle_evaluation"])
        lines += older_data_note(result)
    lines += pass_section(results) + bundle_audit_section(results)
    lines += camera_section() + med_section() + attriguard_section() + sanitizer_section() + tappfl_section()
    lines += [
        "![protocol vs probing attacker](results.png)",
        "",
        "**Finding.** PR-GAN and its adversarial baselines fool the fixed D_z they were trained against, "
        "yet an attacker trained on their output recovers the private attribute far above Random*: "
        "adversarial perturbation hides the attribute from one classifier, not from the data. "
        "PASS is the mechanism meant to close this gap.",
    ]
    return "\n".join(lines) + "\n"


def with_interval(device: dict, key: str, family: "str | None" = None) -> str:
    """A bundle figure with its 95% interval: the audit's (seeds and test rows) where the run audited
    the bundle, else the test rows' binomial interval of a single figure (protocol classifiers)."""
    audited = isinstance(device.get("private"), dict)  # an audit; older runs name the attribute there
    if family and audited and family in device["private"]:
        figure = device["private"][family]
    elif key == "probing_acc_useful" and isinstance(device.get("useful"), dict):
        figure = device["useful"]
    elif audited:
        figure = interval([device[key]], device["n_test"])
    else:  # figures of a run before the audit existed: one seed, no interval recorded
        return pct(device[key])
    return f"{pct(figure['mean'])} [{pct(figure['low'])}, {pct(figure['high'])}]"


def bundle_lines(result: dict) -> list[str]:
    device = result["bundle_evaluation"]
    audited = isinstance(device.get("private"), dict)
    seeds = f", attackers over {device['seeds']} seeds, 95% intervals" if audited else ", one seed"
    lines = [
        f"The exported PR-GAN bundle, attacked through the runtime ({device['backend']}{seeds}): protocol "
        f"Acc(D_z) {with_interval(device, 'protocol_acc_private')}, Acc(D_y) "
        f"{with_interval(device, 'protocol_acc_useful')}, probing attacker "
        f"{with_interval(device, 'probing_acc_private', 'neural')} (neural), "
        f"{with_interval(device, 'tree_acc_private', 'trees')} (trees)"
    ]
    if audited:
        lines[0] += (
            f", {with_interval(device, '', 'trees+useful')} (trees given the useful label), utility probe "
            f"{with_interval(device, 'probing_acc_useful')}"
        )
    lines[0] += (
        f". Generator: {result['bundle_complexity']['params']:,} params, "
        f"{result['bundle_complexity']['flops_torch'] / 1e6:.2f} MFLOPs."
    )
    return lines + [""]


def quantization_note(result: dict, device: dict) -> list[str]:
    """When the device's output (sensor units, e.g. binary WiFi 'heard' flags) loses what the
    continuous generator output did, say so: the deployed figure is the one that protects."""
    trained = result["methods"]["prgan"]["protocol_acc_private"]
    deployed = device["protocol_acc_private"]
    if abs(deployed - trained) < 0.05:
        return []
    dtype = result.get("output_dtype", "the sensor's dtype")
    return [
        f"**Deployed vs trained.** The bundle emits sensor units ({dtype}), so the generator's continuous "
        f"output is rounded on the device; D_z's accuracy moves from {pct(trained)} (continuous, the table "
        f"above) to {pct(deployed)} (what leaves the device). The adversarial perturbation lives largely in "
        "values the sensor cannot produce, the difficulty PR-GAN's section 6.4 notes for discrete features.",
        "",
    ]


def older_data_note(result: dict) -> list[str]:
    """Say so when PASS (docs/pass_results.json) has measured this dataset with another Random*: the two
    scripts saw different versions of the data, and this section's are the older unless re-run."""
    passes = script_results("pass")
    entry = passes["datasets"].get(result["dataset"]) if passes else None
    if not entry or "reference" not in entry or not other_data(result["reference"], entry["reference"]):
        return []
    ours, theirs = result["reference"]["random_star"], entry["reference"]["random_star"]
    return [
        f"**Measured on another version of the data.** This section's Random* is {pct(ours)}%; PASS's run of "
        f"{entry.get('timestamp', 'a later date')} measured {pct(theirs)}% on the same dataset name, so these rows "
        f"come from the dataset as it was before it changed. `python scripts/make_results.py --reuse --rerun "
        f"{result['dataset']}` re-measures them.",
        "",
    ]


def other_data(reference: dict, other: dict) -> bool:
    """Two runs' references on one dataset name: a different Random* means a different prior, so one of
    the two saw the dataset before it changed."""
    return abs(reference["random_star"] - other["random_star"]) > 1e-9


def script_results(name: str) -> "dict | None":
    """docs/NAME_results.json, written by scripts/NAME_results.py; None before that script has run."""
    path = ROOT / "docs" / f"{name}_results.json"
    return json.loads(path.read_text()) if path.is_file() else None


def attriguard_section() -> list[str]:
    """AttriGuard's figures, from docs/attriguard_results.json (scripts/attriguard_results.py, whose page has every
    attacker family, the paper's attackers and the plot): the shared audit's strongest attacker and utility per
    beta, beside the raw rows."""
    results = script_results("attriguard")
    if results is None:
        return []
    lines = [
        "## AttriGuard beside them",
        "",
        f"From `{results['command']}` ({results['timestamp']}; docs/attriguard_results.md has every attacker family "
        "and the paper's own attackers). The released rows are attacked by the shared audit (sensorveil/sdk/audit.py:"
        " its families, 3 seeds, 95% intervals). Strongest attacker and utility probe: mean [95% interval]; "
        "Random*: the best guess of the private attribute from the useful label alone.",
        "",
        "| dataset | private / useful | beta (expected L0) | measured L0 | utility | strongest attacker | Random* "
        "| goal |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for data in results["datasets"]:
        raw = data["raw"]
        lines.append(f"| {data['dataset']} | {data['private']} / {data['useful']} | raw rows | - "
                     f"| {interval_text(raw['utility'])} | {raw['strongest_attacker']} "
                     f"{interval_text(raw['strongest'])} | {pct(raw['random_star'])} | - |")
        for point in data["sweep"]:
            lines.append(
                f"| {data['dataset']} | {data['private']} / {data['useful']} | {point['beta']:g} "
                f"| {point['expected_l0']:.2f} | {interval_text(point['utility'])} | {point['strongest_attacker']} "
                f"{interval_text(point['strongest'])} | {pct(point['random_star'])} | {point['goal']['verdict']} |"
            )
    return lines + [""]


def sanitizer_section() -> list[str]:
    """Sanitizer's four mechanisms, from docs/sanitizer_results.json (scripts/sanitizer_results.py)."""
    results = script_results("sanitizer")
    if results is None:
        return []
    lines = [
        "## Sanitizer beside them",
        "",
        f"From `{results['command']}` ({results['timestamp']}; docs/sanitizer_results.md has CAS, the raw rows "
        "and the curves). Leakage: the strongest attacker of the shared audit (3 seeds) on the sanitized data; "
        "each mechanism's most private setting is shown with the hyper-volume of its whole sweep, and the page's "
        "goal (privacy and utility both) for that setting.",
        "",
        "| dataset | private / useful | mechanism | setting | leakage | Random* | useful probe | HV | goal |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for data in results["datasets"]:
        for kind, curve in data["curves"].items():
            point = min(curve["points"], key=lambda p: p["strongest"]["mean"])
            setting = ", ".join(f"{k} {v:g}" for k, v in point["setting"].items()) or "-"
            lines.append(
                f"| {data['dataset']} | {data['private']} / {data['useful']} | {kind} | {setting} "
                f"| {pct(point['strongest']['mean'])} | {pct(data['random_star'])} "
                f"| {pct(point['utility']['mean'])} | {curve['hypervolume']:.3f} | {point['goal']} |"
            )
    return lines + [""]


def tappfl_section() -> list[str]:
    """TAPPFL's figures, from docs/tappfl_results.json (scripts/tappfl_results.py, whose page has the devices'
    losses, the paper's own measure, the plots and the t-SNE): the shared audit's strongest attacker and utility
    per lambda and privacy term, beside the raw rows."""
    results = script_results("tappfl")
    if results is None:
        return []
    lines = [
        "## TAPPFL beside them",
        "",
        "From docs/tappfl_results.json (docs/tappfl_results.md has the paper's own measure, the devices' losses, "
        "the t-SNE and how each interval is formed). Federated on Flower; the representation the ONNX bundle emits "
        "is attacked by the shared audit (sensorveil/sdk/audit.py: its families, 3 seeds, 95% intervals), on one "
        "federation per release or, where a dataset's run trained several, over them. Strongest attacker and "
        "utility probe: mean [95% interval]; Random*: the best guess of the private attribute from the useful "
        "label alone. Each dataset's own run:",
        "",
        *[f"- {data['dataset']}: `{dataset_origin(data, results)['command']}` "
          f"({dataset_origin(data, results)['date']}, {federations_text(data)})" for data in results["datasets"]],
        "",
        "| dataset | private / useful | lambda | privacy term | utility | strongest attacker | Random* | goal |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for data in results["datasets"]:
        raw = data["raw"]
        lines.append(f"| {data['dataset']} | {data['private']} / {data['useful']} | raw rows | - "
                     f"| {interval_text(raw['utility'])} | {raw['strongest_attacker']} "
                     f"{interval_text(raw['strongest'])} | {pct(raw['random_star'])} | - |")
        points = [point for term in data.get("terms", {}).values() for point in term] or data["points"]
        seen = set()
        for point in sorted(points, key=lambda point: (point["lam"], point.get("term", ""))):
            key = (point["lam"], point.get("term"))
            if key in seen:         # lambda 0 is one run for both terms
                continue
            seen.add(key)
            lines.append(
                f"| {data['dataset']} | {data['private']} / {data['useful']} | {point['lam']:g} "
                f"| {point.get('term', '-')} | {interval_text(point['utility'])} | {point['strongest_attacker']} "
                f"{interval_text(point['strongest'])} | {pct(point['random_star'])} | {point['goal']['verdict']} |")
    return lines + [""]


def dataset_origin(data: dict, results: dict) -> dict:
    """The run that made one dataset's TAPPFL entry: its own provenance (a later run of another dataset keeps
    the entry as it was), else the file's."""
    if isinstance(data.get("provenance"), dict):
        return data["provenance"]
    return {"command": results["command"], "date": results["timestamp"]}


def federations_text(data: dict) -> str:
    count = int(data.get("federation_seeds") or 1)
    return "one federation per release" if count == 1 else f"{count} federations per release"


def camera_section() -> list[str]:
    """PASS and PR-GAN on people crops of walkway.avi, from docs/camera_results.json (scripts/camera_results.py):
    the camera goal part by part, then the attribute attackers' row."""
    results = script_results("camera")
    if results is None:
        return []
    if "goal" not in next(iter(results["mechanisms"].values())):   # a page from before the camera goal
        return []
    lines = [
        "## The camera mechanism on walkway.avi",
        "",
        f"From `{results['command']}` (docs/camera_results.md has each part's figures, every attacker, the "
        "pipeline's cost and the contact sheet). The camera goal as `sensorveil camera-audit` judges it: identity "
        "(re-identification of test tracks disjoint from the attacker's, with power), the leak meter, recall, the "
        "people count against the JPEG-90 floor, and the attribute attackers (appearance clusters against walking "
        f"direction, {results['seeds']} seeds, label-shift weighted); met only when every part holds.",
        "",
        "| mechanism | camera goal | released rank-1 (raw; chance) | leaking boxes | recall | count as raw: "
        "counter (JPEG 90) | strongest attribute attacker | Random* | FPS (whole pipeline) |",
        "|---|---|---|---|---|---|---|---:|---:|",
    ]
    for name, entry in results["mechanisms"].items():
        audit, goal, clip, identity = entry["audit"], entry["goal"], entry["clip"], entry["identity"]
        strongest = audit["privatized"]["strongest_attacker"]
        rank1 = (f"{interval_text(identity['released']['rank1'])} ({pct(identity['raw']['rank1']['mean'])}; "
                 f"{pct(identity['chance']['rank1'])})" if "chance" in identity else identity["verdict"])
        count = ", ".join(f"{counter} {pct(c['same_count'])} ({pct(c['floor_same_count'])})"
                          for counter, c in clip["count"].items() if c.get("in_goal", True))
        lines.append(
            f"| {name} | {goal['verdict']} ({goal['why']}) | {rank1} | {clip['leak_meter']['leaking_boxes']:,} of "
            f"{clip['leak_meter']['offline_boxes']:,} | {pct(clip['recall']['share'])} | {count} "
            f"| {strongest}: {interval_text(audit['privatized']['private'][strongest])} "
            f"| {pct(audit['privatized']['random_star'])} | {entry['cost']['fps']:.1f} |"
        )
    return lines + [""]


def med_section() -> list[str]:
    """PR-GAN-MED beside PR-GAN under the same attackers, from docs/med_results.json (scripts/med_results.py,
    whose page has every attacker family, the protocol figures and the chosen margins)."""
    path = ROOT / "docs" / "med_results.json"
    if not path.is_file():
        return []
    lines = [
        "## Beyond the papers: PR-GAN conditioned on z' ~ MED(z|y)",
        "",
        "From `python scripts/med_results.py` (docs/med_results.md has the exact command, every attacker "
        "family and the protocol figures). ONNX bundles audited as the device runs them, 95% intervals.",
        "",
        "| dataset | private / useful | mechanism | strongest attacker | Random* | utility probe "
        "| fixed D_z on own z |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for data in datasets_of(json.loads(path.read_text())):
        for name, entry in data["methods"].items():
            audit = entry["audit"]
            strongest = audit["strongest_attacker"]
            lines.append(
                f"| {data['dataset']} | {data['private']} / {data['useful']} | {name} "
                f"| {strongest}: {interval_text(audit['private'][strongest])} | {pct(audit['random_star'])} "
                f"| {interval_text(audit['useful'])} | {pct(audit['protocol_acc_private'])} |"
            )
    return lines + [""]


def pass_section(results: list[dict]) -> list[str]:
    """PASS beside PR-GAN on the same test slices and attackers, from docs/pass_results.json
    (written by scripts/pass_results.py; re-run it to refresh these rows)."""
    passes = (script_results("pass") or {}).get("datasets")
    if passes is None:
        return []
    prgan_by_dataset = {r["dataset"]: r["methods"]["prgan"] for r in results}
    lines = [
        "## PASS beside PR-GAN under the same probing attackers",
        "",
        "PASS figures from `python scripts/pass_results.py` (docs/pass_results.json); PR-GAN figures from "
        "this script's runs above. Goal: the strongest attacker within 5 points of Random* "
        "while mNAG >= 50%.",
        "",
        "| dataset | private / useful | mechanism | probing attacker (neural) | probing attacker (trees) "
        "| Random* | useful accuracy (probe) | mNAG |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    apart = []  # datasets whose PASS and PR-GAN rows were measured on different versions of the data
    for name, entry in passes.items():
        task, metrics = entry["task"], entry["metrics"]
        attributes = f"{', '.join(task['private'])} / {', '.join(task['useful'])}"
        lines.append(
            f"| {name} | {attributes} | PASS | {pct(metrics['probing_acc_private'])} "
            f"| {pct(metrics['tree_acc_private'])} | {pct(entry['reference']['random_star'])} "
            f"| {pct(metrics['probing_acc_useful'])} | {pct(metrics['mnag'])} |"
        )
        if name in prgan_by_dataset:
            m = prgan_by_dataset[name]
            ref = next(r["reference"] for r in results if r["dataset"] == name)
            lines.append(
                f"| {name} | {attributes} | PR-GAN | {pct(m['probing_acc_private'])} "
                f"| {pct(m['tree_acc_private'])} | {pct(ref['random_star'])} "
                f"| {pct(m['probing_acc_useful'])} | |"
            )
            if other_data(ref, entry["reference"]):
                apart.append(name)
    if apart:  # a different Random* means a different prior: one of the two runs predates the dataset's change
        lines += [
            "",
            f"On {', '.join(apart)} the two rows' Random* differ: PASS and PR-GAN were measured on different "
            "versions of the data, and the rows cannot be compared until both scripts have been re-run.",
        ]
    return lines + [""]


def bundle_audit_section(results: list[dict]) -> list[str]:
    """The exported bundles of PASS (docs/pass_results.json) and PR-GAN (this script's runs), each
    attacked through the runtime as the device runs it: the strongest attacker family over seeds with
    its 95% interval, the goal's verdict, and the utility probe. Bundles audited before the audit
    existed (one seed, no families) are left out, with their dataset named."""
    passes = (script_results("pass") or {}).get("datasets", {})
    rows, missing = [], []
    for result in results:
        name = result["dataset"]
        for mechanism, device in (
            ("PASS", passes.get(name, {}).get("bundle_evaluation")),
            ("PR-GAN", result["bundle_evaluation"]),
        ):
            if isinstance(device, dict) and isinstance(device.get("private"), dict):
                rows.append(audit_row(name, mechanism, device))
            else:
                missing.append(f"{mechanism} on {name}")
    if not rows:
        return []
    lines = [
        "## The exported bundles, audited as the device runs them",
        "",
        "`sensorveil evaluate BUNDLE`'s attackers (neural, trees, logistic, trees given the useful label, "
        "and for PASS the exact posterior over the bank index) trained on the bundle's output through the "
        "runtime, over seeds; the strongest family's mean with its 95% interval. Goal: strongest within 5 "
        "points of Random*.",
        "",
        "| dataset | mechanism | backend, seeds | strongest attacker | Random* | goal | utility probe |",
        "|---|---|---|---|---:|---|---|",
        *rows,
    ]
    if missing:
        lines += ["", f"Not audited over seeds yet: {', '.join(missing)} (their scripts' runs predate the audit)."]
    return lines + [""]


def audit_row(dataset: str, mechanism: str, device: dict) -> str:
    strongest = device["strongest_attacker"]
    verdict = "met" if device["goal"]["strongest_within_5_points_of_random_star"] else "NOT met"
    return (
        f"| {dataset} | {mechanism} | {device.get('backend', '')}, {device['seeds']} | {strongest}: "
        f"{interval_text(device['private'][strongest])} | {pct(device['random_star'])} | {verdict} "
        f"| {interval_text(device['useful'])} |"
    )


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.6), squeeze=False)
    for ax, result in zip(axes[0], results):
        keys = [k for k in LABELS if k in result["methods"]]
        xs = range(len(keys))
        protocol = [100 * result["methods"][k]["protocol_acc_private"] for k in keys]
        probing = [100 * result["methods"][k]["probing_acc_private"] for k in keys]
        ax.bar([x - 0.2 for x in xs], protocol, 0.4, label="fixed D_z (paper protocol)")
        ax.bar([x + 0.2 for x in xs], probing, 0.4, label="probing attacker")
        ax.axhline(100 * result["reference"]["random_star"], color="k", ls="--", lw=1, label="Random*")
        ax.set_xticks(list(xs), [LABELS[k] for k in keys])
        ax.set_ylabel(f"accuracy on {result['private']} (%)")
        ax.set_title(f"{result['dataset']}: private = {result['private']}")
        ax.set_ylim(0, 100)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(ROOT.parent / "shared" / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--out", default=str(ROOT / "runs" / "results"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--datasets", nargs="+", default=["digits", "ujiindoorloc", "synthetic-depth"])
    parser.add_argument("--quick", action="store_true", help="tiny settings, to test the script")
    parser.add_argument(
        "--depth-margins",
        type=float,
        nargs="+",
        default=list(DEPTH_MARGINS),
        help="hinge-margin fractions swept for synthetic-depth (fewer: 180x180 training is slow)",
    )
    parser.add_argument(
        "--depth-baselines",
        nargs="*",
        default=list(BASELINES),
        choices=BASELINES,
        help="the Table 2 baselines run on synthetic-depth (each of NGP and AP is another "
        "180x180 generator per margin, about 40 min each here)",
    )
    parser.add_argument(
        "--render-only", action="store_true", help="only rewrite results.md/png from the figures in docs/results.json"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="reuse a dataset's figures saved by an earlier run of this script in --out, else "
        "those on the page now (docs/results.json)",
    )
    parser.add_argument(
        "--rerun",
        nargs="+",
        default=[],
        metavar="DATASET",
        help="with --reuse: datasets to compute afresh all the same",
    )
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    parser.add_argument(
        "--reuse-runs",
        action="store_true",
        help="keep a finished PR-GAN run in --out/prgan-<dataset> (its training and run figures) "
        "and redo the export, the audit and the baselines",
    )
    args = parser.parse_args()
    out, docs = Path(args.out), Path(args.docs)
    if not args.render_only:
        require_clean(args.allow_dirty)
        record = provenance(allow_dirty=args.allow_dirty)   # the commit and date the run starts from
        code_version()   # read (and cached) before this run writes its own tracked JSON, which would read dirty
    docs.mkdir(parents=True, exist_ok=True)
    if args.render_only:  # re-draw the page from the figures an earlier run saved
        saved = json.loads((docs / "results.json").read_text())
        results, record = datasets_of(saved), recorded(saved)
    else:
        results = [
            cached_or_run(
                name,
                args.uji if name == "ujiindoorloc" else None,
                out,
                args.quick,
                args.reuse and name not in args.rerun,
                args.depth_margins if name == "synthetic-depth" else None,
                args.depth_baselines if name == "synthetic-depth" else BASELINES,
                args.reuse_runs,
            )
            for name in args.datasets
        ]
        saved = portable({"provenance": record, "datasets": results}, shared=SHARED)
        results, record = saved["datasets"], saved["provenance"]
        (docs / "results.json").write_text(json.dumps(saved, indent=2, default=str))
    plot(results, docs / "results.png")
    note = ""
    if args.render_only or args.reuse:
        versions = ", ".join(f"{r['dataset']} {r.get('code_version', 'unrecorded')}" for r in results)
        note = (
            f"{'Page re-drawn with --render-only' if args.render_only else 'Earlier figures reused'}: "
            f"PR-GAN figures of code version(s) {versions} (this checkout: {code_version()}). "
        )
    (docs / "results.md").write_text(markdown(results, record, note))
    wrote_readme = write_readme_block(results)
    print(f"wrote {docs / 'results.md'}" + (" and README.md's headline block" if wrote_readme else
                                             " (README.md has no results:begin/end markers: its block skipped)"))


def headline_lines(results: list[dict]) -> list[str]:
    """README's headline figures (UJIIndoorLoc, region private, floor useful), from the same JSON files."""
    uji = next((r for r in results if r["dataset"] == "ujiindoorloc"), None)
    lines = []
    if uji:
        prgan, device = uji["methods"]["prgan"], uji["bundle_evaluation"]
        lines += [
            f"- PR-GAN (code version {uji.get('code_version', 'unrecorded')}): the fixed D_z reaches "
            f"{pct(prgan['protocol_acc_private'])}% on the trained generator and "
            f"{pct(device['protocol_acc_private'])}% on the deployed bundle; a probing attacker trained on the "
            f"bundle's output reaches {pct(device['probing_acc_private'])}% (Random* "
            f"{pct(uji['reference']['random_star'])}%)."
        ]
    for name, path in (("PASS", "pass_results.json"),):
        doc = ROOT / "docs" / path
        if doc.is_file():
            entry = json.loads(doc.read_text())["datasets"].get("ujiindoorloc")
            if entry:
                metrics = entry["metrics"]
                lines.append(
                    f"- {name}: the probing attacker reaches {pct(metrics['probing_acc_private'])}% (trees "
                    f"{pct(metrics['tree_acc_private'])}%) against a Random* of "
                    f"{pct(entry['reference']['random_star'])}%, with floor kept at "
                    f"{pct(metrics['probing_acc_useful'])}%."
                )
    for name, path in (("AttriGuard", "attriguard_results.json"),):
        doc = ROOT / "docs" / path
        if doc.is_file():
            data = next((d for d in json.loads(doc.read_text())["datasets"] if d["dataset"] == "ujiindoorloc"), None)
            if data:
                best = min(data["sweep"], key=lambda p: p["strongest"]["mean"])
                lines.append(
                    f"- {name}: at beta {best['beta']:g} (measured L0 {best['expected_l0']:.1f}) the strongest "
                    f"attacker of the shared audit, {best['strongest_attacker']}, reaches "
                    f"{interval_text(best['strongest'])}% (Random* {pct(data['random_star'])}%), floor probe "
                    f"{interval_text(best['utility'])}%."
                )
    doc = ROOT / "docs" / "sanitizer_results.json"
    if doc.is_file():
        data = next((d for d in json.loads(doc.read_text())["datasets"] if d["dataset"] == "ujiindoorloc"), None)
        if data:
            kind, curve = max(data["curves"].items(), key=lambda item: item[1]["hypervolume"])
            point = min(curve["points"], key=lambda p: max(p["leakage"], p["leakage_trees"]))
            lines.append(
                f"- Sanitizer: its best mechanism by hyper-volume, {kind}, leaks "
                f"{pct(max(point['leakage'], point['leakage_trees']))}% at its most private setting "
                f"(Random* {pct(data['random_star'])}%), floor probe {pct(point['utility'])}%."
            )
    return lines


def write_readme_block(results: list[dict]) -> bool:
    """README's headline block between its markers; False (nothing written) where it has none."""
    readme = ROOT / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + begin + "\n" + "\n".join(headline_lines(results)) + "\n" + end + tail)
    return True


if __name__ == "__main__":
    main()
