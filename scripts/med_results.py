#!/usr/bin/env python
"""PR-GAN against PR-GAN-MED (its generator conditioned on z' ~ MED(z|y), beyond the paper) under the
same attackers, written to docs/med_results.{md,json}. Every figure on that page comes from this script:

    python scripts/med_results.py [--datasets digits ujiindoorloc] [--uji ../shared/datasets/ujiindoorloc.zip]
                                  [--epochs N] [--margins F ...] [--seeds 3] [--attacker-epochs 20]
                                  [--out runs/med-results]

For each dataset and mechanism: train with PR-GAN's config for the dataset (section 6.4's threshold and
margin sweep; --epochs/--margins override both mechanisms alike), export the ONNX bundle, and audit the
bundle exactly as the device runs it (sensorveil.sdk.assess.audit_path, the code behind `sensorveil
evaluate BUNDLE`: neural, trees, logistic and trees+useful attackers over --seeds seeds, 95% intervals,
the neural utility probe, Random*, the fixed D_y/D_z of the paper's protocol). For PR-GAN-MED also: how
often the fixed D_z reads the drawn z' from G's output (what it is trained for; the trained model, with
the device's draws). Datasets not named keep their earlier figures in the JSON, each stamped with when
and from which code version it was computed.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from sensorveil.export import export_run
from sensorveil.runtime.stages.prgan_med import conditioned
from sensorveil.sdk import mechanisms, runs
from sensorveil.sdk.assess import audit_path
from sensorveil.sdk.mechanisms import prgan
from sensorveil.sdk.training import apply, predict
from sensorveil_lab.prgan_pages import datasets_of
from sensorveil_lab.provenance import code_version, page_header, portable, provenance, require_clean

ROOT = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))

DATA_PATHS = {"digits": None, "ujiindoorloc": "uji"}
MECHANISMS = {"prgan": "PR-GAN", "prgan-med": "PR-GAN-MED"}
FAMILIES = ("neural", "trees", "logistic", "trees+useful")


def config_for(name: str, epochs, margins) -> prgan.PRGANConfig:
    config = prgan.default_config(name, runs.DEFAULT_TASKS[name][2])
    config.progress = False
    if epochs:
        config.epochs = epochs
    if margins:
        config.margin_fractions = tuple(margins)
    return config


def follows_drawn_value(run_dir: Path) -> float:
    """PR-GAN-MED's own objective on the test slice: how often the fixed D_z reads the z' that the
    device's draw (y^ = argmax D_y(x), z' ~ MED(z|y^)) asked G for."""
    mechanism = mechanisms.get("prgan-med")
    run = runs.read_run(run_dir)
    exp, G = mechanism.load(run_dir, run)
    x = exp.x[exp.slices["test"]]
    packed, drawn = conditioned(x.numpy(), predict(exp.fixed["D_y"], x), exp.med, mechanism.noise_dim(run),
                                np.random.default_rng(run["seed"]))
    return float((predict(exp.fixed["D_z"], apply(G, torch.from_numpy(packed))) == drawn).mean())


def one_mechanism(mechanism: str, dataset: str, data_path, out: Path, config, seeds: int, attacker_epochs: int):
    started = time.time()
    run_dir = runs.train_run(mechanism, dataset, data_path=data_path, out=out / f"{mechanism}-{dataset}",
                             config=config, attacker_epochs=attacker_epochs)
    trained = time.time()
    run = runs.read_run(run_dir)
    bundle = export_run(run_dir, "onnx", out / "bundles" / f"{mechanism}-{dataset}")
    print(f"[{mechanism}-{dataset}] auditing the bundle over {seeds} seeds", flush=True)
    audit = audit_path(bundle, seeds=seeds, attacker_epochs=attacker_epochs,
                       log=lambda line: print(f"[{mechanism}-{dataset}] {line}", flush=True))
    chosen = run["selection"]["sweep"][run["selection"]["chosen"]]
    record = {"mechanism": mechanism, "run": str(run_dir), "bundle": str(bundle), "audit": audit,
              "reference": run["reference"], "selection": {"margin_c": run["selection"]["margin_c"],
                                                           "margin_fraction": chosen["margin_fraction"],
                                                           "threshold_met": run["selection"]["threshold_met"]},
              "train_seconds": round(trained - started, 1), "seconds": round(time.time() - started, 1)}
    if mechanism == "prgan-med":
        record["dz_follows_drawn"] = follows_drawn_value(run_dir)
    return record


def one_dataset(dataset: str, data_path, out: Path, args) -> dict:
    config = config_for(dataset, args.epochs, args.margins)
    methods = {}
    for mechanism in MECHANISMS:
        methods[mechanism] = one_mechanism(mechanism, dataset, data_path, out, config, args.seeds,
                                           args.attacker_epochs)
        print(f"{dataset} {mechanism}: {methods[mechanism]['seconds']} s", flush=True)
    useful, private, threshold = runs.default_task(dataset, None, None)
    return {"dataset": dataset, "useful": useful[0], "private": private[0], "utility_threshold": threshold,
            "config": prgan.config_dict(config), "methods": methods, "options": options_of(args),
            "computed": time.strftime("%Y-%m-%d %H:%M"), "code_version": code_version()}


def options_of(args) -> list:
    """The command-line options a dataset's figures were computed with (all but where files go)."""
    options = (["--epochs", str(args.epochs)] if args.epochs else []) + (
        ["--margins"] + [str(m) for m in args.margins] if args.margins else [])
    return options + ["--seeds", str(args.seeds), "--attacker-epochs", str(args.attacker_epochs)]


def cell(figure: dict) -> str:
    return f"{figure['mean']:.1%} [{figure['low']:.1%}, {figure['high']:.1%}]"


def markdown(results: list, record: dict) -> str:
    lines = ["# PR-GAN-MED beside PR-GAN under the same attackers", "", page_header(record), "",
             "A dataset the command did not name keeps the figures of an earlier run: each section below says "
             "when and from which code version its figures were computed.", "",
             "PR-GAN-MED (sensorveil/sdk/mechanisms/prgan_med.py, `prgan-med`) takes the first step of PR-GAN "
             "Theorem 1's mechanism A* literally: on the device the fixed D_y predicts y from x, a numpy stage "
             "draws z' ~ MED(z|y) (eq. 3) and noise with the Privatizer's generator, and G(x, y, z', noise) is "
             "trained (eq. 7-11, with eq. 8's D_z term aimed at z') so that the fixed D_z reads z'. Both bundles "
             "are ONNX, audited as the device runs them by the code behind `sensorveil evaluate BUNDLE`: attackers "
             "trained on the released training split with the true private labels, scored on the released test "
             "split, mean over seeds with a 95% interval (seed spread and test-set binomial error). Random* is "
             "what the published useful label and the public prior alone give (PR-GAN Table 2's floor).", ""]
    for result in results:
        methods = result["methods"]
        first = next(iter(methods.values()))
        audit = first["audit"]
        lines += [f"## {result['dataset']}: useful {result['useful']}, private {result['private']}", "",
                  f"Computed {result['computed']} from code version {result['code_version']}; config: "
                  f"{result['config']['epochs']} epochs, margin sweep {result['config']['margin_fractions']} "
                  f"x mean ||x||, Acc(D_y) threshold {result['utility_threshold']}; audit: {audit['seeds']} seeds "
                  f"x {audit['attacker_epochs']} attacker epochs, {audit['n_attacker_train']} training / "
                  f"{audit['n_test']} test rows. Raw data: fixed D_z "
                  f"{first['reference']['original_acc_private']:.1%}, fixed D_y "
                  f"{first['reference']['original_acc_useful']:.1%}.", "",
                  "| attacker on the private attribute | " + " | ".join(MECHANISMS[m] for m in methods) + " |",
                  "|---|" + "---|" * len(methods)]
        for family in FAMILIES:
            lines.append(f"| {family} | " + " | ".join(cell(r["audit"]["private"][family]) for r in methods.values())
                         + " |")
        rows = [("strongest attacker", lambda r: r["audit"]["strongest_attacker"]),
                ("Random* (useful label + prior)", lambda r: f"{r['audit']['random_star']:.1%}"),
                ("goal: strongest <= Random* + 5 points",
                 lambda r: "met" if r["audit"]["goal"]["strongest_within_5_points_of_random_star"] else "NOT met"),
                ("utility: neural probe on the useful attribute", lambda r: cell(r["audit"]["useful"])),
                ("protocol: fixed D_y (useful)", lambda r: f"{r['audit']['protocol_acc_useful']:.1%}"),
                ("protocol: fixed D_z (private, x's own z)", lambda r: f"{r['audit']['protocol_acc_private']:.1%}"),
                ("fixed D_z reads the drawn z'", lambda r: f"{r['dz_follows_drawn']:.1%}" if "dz_follows_drawn" in r
                 else "n/a"),
                ("chosen margin c (fraction of mean ||x||)", lambda r: f"{r['selection']['margin_fraction']}"
                 + ("" if r["selection"]["threshold_met"] else " (threshold missed)")),
                ("train + export + audit seconds", lambda r: f"{r['seconds']:.0f}")]
        for label, value in rows:
            lines.append(f"| {label} | " + " | ".join(value(r) for r in methods.values()) + " |")
        lines += ["", finding(result), ""]
    return "\n".join(lines) + "\n"


def finding(result: dict) -> str:
    """One sentence per dataset, computed from the figures above: does either mechanism leak."""
    parts = []
    for mechanism, record in result["methods"].items():
        audit = record["audit"]
        strongest = audit["strongest_attacker"]
        figure = audit["private"][strongest]
        verdict = ("within 5 points of Random*" if audit["goal"]["strongest_within_5_points_of_random_star"]
                   else "leaks: its strongest attacker is above Random* + 5 points")
        parts.append(f"{MECHANISMS[mechanism]} {verdict} ({strongest} {cell(figure)} against "
                     f"{audit['random_star']:.1%})")
    return "Finding: " + "; ".join(parts) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["digits", "ujiindoorloc"], choices=list(DATA_PATHS))
    parser.add_argument("--uji", default=str(ROOT.parent / "shared" / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--epochs", type=int, default=None, help="G's epochs per margin (default: PR-GAN's)")
    parser.add_argument("--margins", type=float, nargs="+", default=None,
                        help="eq. 10 margin fractions to sweep (default: PR-GAN's for the dataset)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--attacker-epochs", type=int, default=20)
    parser.add_argument("--out", default="runs/med-results")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    require_clean(args.allow_dirty)
    torch.set_num_threads(1)
    docs, out = ROOT / "docs", Path(args.out)
    path = docs / "med_results.json"
    earlier = {r["dataset"]: r for r in datasets_of(json.loads(path.read_text()))} if path.is_file() else {}
    record = provenance(allow_dirty=args.allow_dirty)
    for dataset in args.datasets:
        data_path = args.uji if DATA_PATHS[dataset] == "uji" else None
        earlier[dataset] = one_dataset(dataset, data_path, out, args)
        saved = portable({"provenance": record, "datasets": [earlier[name] for name in DATA_PATHS if name in earlier]},
                         shared=SHARED)
        path.write_text(json.dumps(saved, indent=2, default=str))     # saved per dataset: a long run may stop
        (docs / "med_results.md").write_text(markdown(saved["datasets"], saved["provenance"]))
        print(f"wrote {docs / 'med_results.md'} and {path}", flush=True)


if __name__ == "__main__":
    main()
