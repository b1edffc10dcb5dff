#!/usr/bin/env python
"""TAPPFL's Table 2 layout (test accuracy of the primary task, attribute inference accuracy and its gap to
random guessing, for lambda in 0, 0.25, 0.5, 0.75, 1), its Figure 2 (the devices' CE and JSD losses
against lambda) and Figure 3 (t-SNE of raw data and of the learnt representations), on digits (private
lt5, useful parity) and UJIIndoorLoc (private region, useful floor). Written to
docs/tappfl_results.{json,md,png} and docs/tappfl_tsne.png; every figure on that page comes from:

    python scripts/tappfl_results.py [--uji ../shared/datasets/ujiindoorloc.zip] [--lambdas 0 0.25 0.5 0.75 1]
                                     [--clients 100] [--rounds 20] [--pretrain-rounds 5] [--attacker-epochs 20]
    python scripts/tappfl_results.py --render-only     # the page again from docs/tappfl_results.json

The paper's setting by default: 100 devices, 10% of them a round, 20 rounds, 10 local epochs, batch 10,
SGD at 0.01, on Flower's simulation runtime. f is pre-trained once per dataset (federated rounds of the
utility term alone) and every lambda starts from that f, as the paper's "we first pretrain the feature
extractor network only". Each lambda's f is exported to an ONNX bundle, and the attackers (a neural net
and extra-trees, trained on the released representations) and the utility probe score what that bundle
emits, as a device computes it; the run's own torch figures are kept in the JSON beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from make_results import code_version  # scripts/ is on sys.path when a script runs

from sensorveil.benchmarks.provenance import page_header, portable, provenance, recorded, require_clean
from sensorveil.export import export_run
from sensorveil.sdk import mechanisms
from sensorveil.sdk.mechanisms.tappfl import flower_version
from sensorveil.sdk.runs import read_run, train_run

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASETS = {"digits": {"useful": "parity", "private": "lt5", "uji": False},
            "ujiindoorloc": {"useful": "floor", "private": "region", "uji": True}}
TSNE_ROWS = 800


def federation_settings(args, **extra) -> dict:
    settings = {"clients": args.clients, "rounds": args.rounds, "local_epochs": args.local_epochs,
                "evaluate_fraction": 0.0, "timeout_s": args.timeout_s, "progress": True}
    return {key: str(value) for key, value in {**settings, **extra}.items()}


def pretrain(name: str, args, out: Path) -> Path:
    """The shared starting point: pre-training rounds only (no TAPPFL round), raw-data attackers included."""
    spec = DATASETS[name]
    return train_run("tappfl", name, data_path=args.uji if spec["uji"] else None, useful=spec["useful"],
                     private=spec["private"], out=out / f"{name}-pretrain", attacker_epochs=args.attacker_epochs,
                     settings=federation_settings(args, rounds=0, pretrain_rounds=args.pretrain_rounds,
                                                  reference_attacks="true"))


def lambda_point(name: str, lam: float, pretrained: Path, args, out: Path) -> dict:
    """One row of Table 2: train from the pre-trained f, export to ONNX, attack what the bundle emits."""
    spec = DATASETS[name]
    run_dir = train_run("tappfl", name, data_path=args.uji if spec["uji"] else None, useful=spec["useful"],
                        private=spec["private"], out=out / f"{name}-lam{lam:g}", attacker_epochs=args.attacker_epochs,
                        settings=federation_settings(args, lam=lam, pretrained=pretrained, pretrain_rounds=0,
                                                     reference_attacks="false"))
    run = read_run(run_dir)
    bundle = export_run(run_dir, "onnx", out / f"{name}-lam{lam:g}-bundle", attacker_epochs=0)
    deployed = mechanisms.get("tappfl").evaluate_bundle(bundle, "onnxruntime", run_dir, run, args.attacker_epochs)
    last = run["federation"]["rounds"][-1]["train"]
    return {"lam": lam, "run": str(run_dir), "bundle": str(bundle), "deployed": deployed, "trained": run["metrics"],
            "wall_seconds": run["federation"]["wall_seconds"], "ce": last.get("ce"), "jsd": last.get("jsd"),
            "vclub": last.get("vclub")}


def tsne_panels(name: str, point: dict, args) -> dict:
    """2-D t-SNE of raw test rows and of their representations (the bundle's output), by private value."""
    from sklearn.manifold import TSNE

    from sensorveil.runtime import Privatizer
    mechanism = mechanisms.get("tappfl")
    run = read_run(point["run"])
    task, _ = mechanism.task(point["run"], run)
    rows = task.test[:TSNE_ROWS]
    release = mechanism.release(point["run"], run, Privatizer.load(point["bundle"], backend="onnxruntime"))
    representation = release.task.x[rows].numpy()
    raw = task.x[rows].flatten(1).numpy()
    embed = lambda x: TSNE(n_components=2, init="pca", random_state=0, perplexity=30).fit_transform(x)   # noqa: E731
    return {"raw": embed(raw), "learnt": embed(representation), "private": np.asarray(task.private[rows]),
            "lam": point["lam"]}


def best_tradeoff(points: list[dict]) -> dict:
    """Figure 3's lambda: the best utility minus the worst attack gap (the paper picks it from Table 2)."""
    return max(points, key=lambda p: p["deployed"]["probing_acc_useful"] - p["deployed"]["worst_gap_private"])


def run_dataset(name: str, args, out: Path) -> tuple[dict, dict]:
    started = time.time()
    pre_dir = pretrain(name, args, out)
    pre = read_run(pre_dir)
    points = [lambda_point(name, lam, pre_dir, args, out) for lam in args.lambdas]
    result = {"dataset": name, "useful": DATASETS[name]["useful"], "private": DATASETS[name]["private"],
              "reference": pre["reference"], "pretrained": pre["metrics"], "points": points,
              "pretrain_wall_seconds": pre["federation"]["wall_seconds"],
              "partition": pre["federation"]["partition"], "seconds": round(time.time() - started, 1)}
    return result, tsne_panels(name, best_tradeoff(points), args)


def pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown(results: dict) -> str:
    lines = [
        "# TAPPFL: utility against attribute inference",
        "",
        page_header(recorded(results)),
        "",
        f"Flower {results['flower']}. Setting: {results['settings']['clients']} devices, 10% a round, "
        f"{results['settings']['pretrain_rounds']} "
        f"pre-training rounds (utility term only), then {results['settings']['rounds']} TAPPFL rounds, "
        f"{results['settings']['local_epochs']} local epochs, batch 10, SGD lr 0.01; IID partition. "
        "*Test acc*: a neural probe of the primary task trained on the released representations. *Infer. acc*: "
        "the stronger of a neural attacker and extra-trees trained on the released representations; *Gap*: "
        "infer. acc minus random guessing 1/K (Table 2's baseline). Random*: the majority-class rate of the "
        "private attribute on the test rows. Every figure is measured on the ONNX bundle's output, as a device "
        "computes it; one seed.",
        "",
    ]
    for data in results["datasets"]:
        ref = data["reference"]
        lines += [
            f"## {data['dataset']} (private {data['private']}, useful {data['useful']})",
            "",
            f"Raw data (no defence): test acc {pct(ref.get('raw_probing_acc_useful'))}, infer. acc "
            f"{pct(max(ref.get('raw_probing_acc_private', 0), ref.get('raw_tree_acc_private', 0)))}; random "
            f"guess {pct(ref['random_guess_private'])}, Random* {pct(ref['random_star'])}. Pre-trained f "
            f"(lambda not applied yet): test acc {pct(data['pretrained']['probing_acc_useful'])}, infer. acc "
            f"{pct(max(data['pretrained']['probing_acc_private'], data['pretrained']['tree_acc_private']))}.",
            "",
            "| lambda | Test acc | Infer. acc (neural) | Infer. acc (trees) | Gap | devices' CE | devices' JSD "
            "| wall s |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in data["points"]:
            d = p["deployed"]
            lines.append(
                f"| {p['lam']:g} | {pct(d['probing_acc_useful'])} | {pct(d['probing_acc_private'])} "
                f"| {pct(d['tree_acc_private'])} | {100 * d['worst_gap_private']:+.1f} | {p['ce']:.3f} "
                f"| {p['jsd']:.3f} | {p['wall_seconds']:.0f} |"
            )
        lines += ["", lambda_effect(data), ""]
    lines += [
        "![Table 2 and Figure 2 as plots](tappfl_results.png)",
        "",
        "![t-SNE of raw and learnt representations, coloured by the private attribute](tappfl_tsne.png)",
        "",
    ]
    return "\n".join(lines)


def lambda_effect(data: dict) -> str:
    """What lambda bought, read off the rows: the change in gap and test accuracy from the smallest to the
    largest lambda (the paper's Table 2 shows the gap shrinking toward 0 as lambda grows)."""
    first, last = data["points"][0], data["points"][-1]
    gap = 100 * (last["deployed"]["worst_gap_private"] - first["deployed"]["worst_gap_private"])
    utility = 100 * (last["deployed"]["probing_acc_useful"] - first["deployed"]["probing_acc_useful"])
    verdict = (
        "the released representation still leaks the private attribute to the tree attacker"
        if last["deployed"]["worst_gap_private"] > 0.05
        else "the gap closes"
    )
    return (
        f"**Finding.** From lambda {first['lam']:g} to {last['lam']:g} the gap moves by {gap:+.1f} points and "
        f"test acc by {utility:+.1f} points: {verdict}."
    )


def plot(results: dict, panels: dict, docs: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results["datasets"])
    fig, axes = plt.subplots(2, n, figsize=(5.5 * n, 7.5), squeeze=False)
    for col, data in enumerate(results["datasets"]):
        lams = [p["lam"] for p in data["points"]]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(lams, [p["deployed"]["probing_acc_useful"] for p in data["points"]], "o-", label="test acc (useful)")
        top.plot(
            lams,
            [max(p["deployed"]["probing_acc_private"], p["deployed"]["tree_acc_private"]) for p in data["points"]],
            "s-",
            label="infer. acc (private)",
        )
        top.axhline(data["reference"]["random_guess_private"], color="grey", ls=":", label="random guess")
        top.set(title=f"{data['dataset']}: Table 2", xlabel="lambda", ylabel="accuracy", ylim=(0, 1.02))
        top.legend(fontsize=8)
        bottom.plot(lams, [p["ce"] for p in data["points"]], "o-", label="CE loss (privacy)")
        bottom.plot(lams, [p["jsd"] for p in data["points"]], "s-", label="JSD estimate (utility)")
        bottom.set(title=f"{data['dataset']}: Figure 2 (devices' last round)", xlabel="lambda")
        bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(docs / "tappfl_results.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(n, 2, figsize=(10, 4.6 * n), squeeze=False)
    for row, (name, panel) in enumerate(panels.items()):
        for col, key in enumerate(("raw", "learnt")):
            ax = axes[row][col]
            points = ax.scatter(panel[key][:, 0], panel[key][:, 1], c=panel["private"], s=5, cmap="tab10")
            title = "raw input" if key == "raw" else f"TAPPFL representation (lambda {panel['lam']:g})"
            ax.set(title=f"{name}: {title}", xticks=[], yticks=[])
        axes[row][1].legend(*points.legend_elements(), title="private", fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(docs / "tappfl_tsne.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(ROOT.parent / "shared" / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pretrain-rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=10)
    parser.add_argument("--attacker-epochs", type=int, default=20)
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of each federation")
    parser.add_argument("--out", default=str(ROOT / "runs" / "tappfl-results"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite tappfl_results.md from the JSON of the last run (no training)",
    )
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args()
    out, docs = Path(args.out), Path(args.docs)
    if args.render_only:
        (docs / "tappfl_results.md").write_text(markdown(json.loads((docs / "tappfl_results.json").read_text())))
        return
    require_clean(args.allow_dirty)
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "command": "python scripts/tappfl_results.py " + " ".join(sys.argv[1:]),
        "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code_version": code_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "flower": flower_version(),
        "settings": {
            "clients": args.clients,
            "rounds": args.rounds,
            "pretrain_rounds": args.pretrain_rounds,
            "local_epochs": args.local_epochs,
            "attacker_epochs": args.attacker_epochs,
        },
        "datasets": [],
        "provenance": provenance(allow_dirty=args.allow_dirty),   # the commit and date the run starts from
    }
    panels = {}
    for name in args.datasets:
        result, panels[name] = run_dataset(name, args, out)
        results["datasets"].append(result)
        print(f"[tappfl-results] {name} done in {result['seconds']:.0f} s", flush=True)
    docs.mkdir(parents=True, exist_ok=True)
    results = portable(results, shared=SHARED)
    (docs / "tappfl_results.json").write_text(json.dumps(results, indent=2, default=float))
    (docs / "tappfl_results.md").write_text(markdown(results))
    plot(results, panels, docs)
    print(f"wrote {docs / 'tappfl_results.md'}")


if __name__ == "__main__":
    main()
