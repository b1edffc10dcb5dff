"""Train PASS on the paper-style tasks, attack it, export it, time it, and write docs/pass_results.json.

    python scripts/pass_results.py [--out pass-results] [--json docs/pass_results.json]
                                   [--prgan-bundles DIR] [--datasets digits ujiindoorloc synthetic-depth]
                                   [--reuse-run]   # keep a finished run in --out/runs, redo export and timing
                                   [--audit-seeds 3]  # the exported bundle's audit; 0 leaves it out

Per dataset: `train_run("pass", ...)` (training + probing attack with the neural and the tree
attacker + Random*), `export_run(..., "onnx")` (validated against torch through the runtime), and
a batch-1 benchmark through the runtime, and the audit of the exported bundle as the device runs it
(`sensorveil evaluate`'s attackers of every family, over seeds, with 95% intervals). PR-GAN's FPS on the
same input size comes from the PR-GAN
bundle in --prgan-bundles/prgan-<dataset> when there is one; otherwise a PR-GAN generator is trained
for one epoch only to time its architecture (its privacy figures are not used and not reported).

Goal: the attacker's private accuracy within 5 points of Random* while mNAG >= 50%.
Every figure in the JSON comes from these runs; none is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from sensorveil.benchmarks.provenance import portable, provenance, require_clean

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))
# dataset -> (useful, private, hidden, data path)
TASKS = {
    "digits": (["parity"], ["lt5"], [], None),
    "ujiindoorloc": (["floor"], ["region"], [], SHARED / "datasets" / "ujiindoorloc.zip"),
    "synthetic-depth": (["facing"], ["identity"], [], None),
}
GOAL_POINTS = 0.05
GOAL_MNAG = 0.5
AUDIT_SEEDS = 3  # as scripts/make_results.py audits PR-GAN's bundles


def goal_check(metrics: dict, private: list) -> dict:
    """Per private attribute: the stronger attacker's accuracy against Random* (+5 points)."""
    rows, met = {}, metrics["mnag"] >= GOAL_MNAG
    for attr in private:
        row = metrics["attributes"][attr]
        strongest = max(row["acc"], row["tree_acc"])
        ok = strongest <= row["random_star"] + GOAL_POINTS
        rows[attr] = {
            "attacker_acc_neural": row["acc"],
            "attacker_acc_tree": row["tree_acc"],
            "random_star": row["random_star"],
            "random_star_source": row["random_star_source"],
            "gap_points": 100 * (strongest - row["random_star"]),
            "within_5_points": ok,
        }
        met = met and ok
    return {"private": rows, "mnag": metrics["mnag"], "mnag_at_least_50": metrics["mnag"] >= GOAL_MNAG, "met": met}


def runtime_row(bundle: Path) -> dict:
    from sensorveil.benchmarks.bench import benchmark_bundle

    row = benchmark_bundle(bundle, backend="onnxruntime", iters=300)["rows"][0]
    keep = ("params", "flops_torch", "flops_onnx", "runtime_p50_ms", "fps", "model_fps", "output_mode")
    return {**{k: row.get(k) for k in keep}, **{k: v for k, v in row.items() if k.startswith("bytes_per_frame")}}


def prgan_timing_bundle(dataset: str, data_path, out: Path, prgan_bundles: Path | None) -> tuple[Path, str]:
    if prgan_bundles and (prgan_bundles / f"prgan-{dataset}" / "manifest.json").is_file():
        return prgan_bundles / f"prgan-{dataset}", "PR-GAN bundle given with --prgan-bundles"
    from sensorveil.export import export_run
    from sensorveil.sdk.mechanisms.prgan import PRGANConfig
    from sensorveil.sdk.runs import train_run

    config = PRGANConfig(epochs=1, classifier_epochs=1, margin_fractions=(0.2,), progress=False)
    run = train_run(
        "prgan",
        dataset,
        data_path=data_path,
        out=out / "runs" / f"prgan-timing-{dataset}",
        config=config,
        attacker_epochs=1,
    )
    bundle = export_run(run, "onnx", out / "bundles" / f"prgan-timing-{dataset}")
    return bundle, "PR-GAN architecture, 1 epoch (timing only)"


def one_dataset(
    dataset: str,
    out: Path,
    docs: Path,
    prgan_bundles: Path | None,
    epochs: int | None,
    reuse_run: bool = False,
    audit_seeds: int = AUDIT_SEEDS,
) -> dict:
    from sensorveil.export import export_run
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.runs import read_run, train_run

    useful, private, hidden, data_path = TASKS[dataset]
    if data_path is not None and not Path(data_path).is_file():
        return {"skipped": f"{data_path} not found (set SENSORVEIL_SHARED)"}
    started = time.time()
    run_dir = out / "runs" / f"pass-{dataset}"
    if not (reuse_run and (run_dir / "run.json").is_file()):
        run_dir = train_run(
            "pass",
            dataset,
            data_path=data_path,
            useful=useful,
            private=private,
            hidden=hidden,
            out=run_dir,
            epochs=epochs,
        )
    run = read_run(run_dir)
    bundle = export_run(run_dir, "onnx", out / "bundles" / f"pass-{dataset}")
    manifest = json.loads((bundle / "manifest.json").read_text())
    plot = docs / f"pass_confusion_{dataset}.png"
    shutil.copyfile(run_dir / "substitution_confusion.png", plot)
    prgan_bundle, prgan_source = prgan_timing_bundle(dataset, data_path, out, prgan_bundles)
    metrics = {k: v for k, v in run["metrics"].items() if k != "confusion"}
    audited = {"bundle_evaluation": audit_path(bundle, seeds=audit_seeds)} if audit_seeds else {}
    return {
        "task": {"useful": useful, "private": private, "hidden": hidden},
        "config": run["config"],
        "substitution": run["substitution"],
        "training": {k: v for k, v in run["training"].items() if k != "history"},
        "loss_first_last_epoch": [run["training"]["history"][0], run["training"]["history"][-1]],
        "reference": run["reference"],
        "metrics": metrics,
        "confusion": run["metrics"]["confusion"],
        "goal": goal_check(run["metrics"], private),
        "complexity": manifest.get("complexity"),
        "validation": manifest.get("validation"),
        "runtime_pass": runtime_row(bundle),
        "runtime_prgan": {**runtime_row(prgan_bundle), "source": prgan_source},
        **audited,
        "confusion_plot": str(plot.relative_to(REPO)) if plot.is_relative_to(REPO) else str(plot),
        "run_dir": str(run_dir),
        "bundle": str(bundle),
        "seconds": round(time.time() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="pass-results", help="runs and bundles go here")
    parser.add_argument("--json", default=str(REPO / "docs" / "pass_results.json"))
    parser.add_argument("--prgan-bundles", default=None, help="folder with prgan-<dataset> bundles to time")
    parser.add_argument("--datasets", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--epochs", type=int, default=None, help="override PASS epochs (default per dataset)")
    parser.add_argument(
        "--reuse-run",
        action="store_true",
        help="keep a finished run in --out/runs (its training and probing attack) and redo the rest",
    )
    parser.add_argument(
        "--audit-seeds", type=int, default=AUDIT_SEEDS, help="seeds of the exported bundle's audit (0: leave it out)"
    )
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the JSON says so)")
    args = parser.parse_args()
    require_clean(args.allow_dirty)
    out, json_path = Path(args.out), Path(args.json)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    prgan = Path(args.prgan_bundles) if args.prgan_bundles else None
    from sensorveil.benchmarks.report import cpu_description

    # datasets not named this time keep their figures from the file (each entry says when it was computed)
    earlier = json.loads(json_path.read_text())["datasets"] if json_path.is_file() else {}
    record = provenance(allow_dirty=args.allow_dirty)
    results = {
        "generated_by": "scripts/pass_results.py",
        "cpu": cpu_description(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "goal": f"strongest attacker's private accuracy <= Random* + {100 * GOAL_POINTS:.0f} points "
        f"and mNAG >= {100 * GOAL_MNAG:.0f}%",
        "datasets": {name: entry for name, entry in earlier.items() if name not in args.datasets},
        "provenance": record,
    }
    for dataset in args.datasets:
        print(f"== PASS on {dataset}")
        entry = one_dataset(dataset, out, json_path.parent, prgan, args.epochs, args.reuse_run, args.audit_seeds)
        results["datasets"][dataset] = {**entry, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "provenance": record}
        results = portable(results, shared=SHARED)
        json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")  # partial results survive
        print(json.dumps(results["datasets"][dataset].get("goal", results["datasets"][dataset]), indent=1))
    print(f"wrote {json_path}")


if __name__ == "__main__":
    main()
