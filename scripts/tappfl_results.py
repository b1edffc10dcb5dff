#!/usr/bin/env python
"""TAPPFL's Table 2 layout (test accuracy of the primary task, attribute inference accuracy and its gap to
random guessing, for lambda in 0, 0.25, 0.5, 0.75, 1), its Figure 2 (the devices' CE and JSD losses
against lambda) and Figure 3 (t-SNE of raw data and of the learnt representations), on digits (private
lt5, useful parity) and UJIIndoorLoc (private region, useful floor). Written to
docs/tappfl_results.{json,md,png} and docs/tappfl_tsne.png; every figure on that page comes from:

    python scripts/tappfl_results.py [--uji ../shared/datasets/ujiindoorloc.zip] [--lambdas 0 0.25 0.5 0.75 1]
                                     [--clients N] [--rounds 20] [--pretrain-rounds 5] [--attacker-epochs 20]
    python scripts/tappfl_results.py --render-only     # the page again from docs/tappfl_results.json

The paper's setting by default: Algorithm 1 (every device runs DeviceUpdate every round, the server
averages 10% of them), 20 rounds, 10 local epochs, batch 10, SGD at 0.01, on Flower's simulation runtime,
with as many rows a device as the paper's (tappfl.paper_scale_clients: ~326, Adult over 100 devices; 4
devices on digits), each device holding 20% of its rows out. f is pre-trained once per dataset (federated
rounds of the utility term alone) and every lambda starts from that f, as the paper's "we first pretrain
the feature extractor network only". Privacy is measured two ways, side by side: the paper's own (each
device's g on its held-out rows, mean over devices, at the end of training) and fresh attackers (a neural
net and extra-trees) trained on the released representations; each lambda's f is exported to an ONNX
bundle, and the attackers and the utility probe score what that bundle emits, as a device computes it.
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

from sensorveil.export import export_run
from sensorveil.sdk import mechanisms
from sensorveil.sdk.datasets import load_dataset
from sensorveil.sdk.mechanisms.tappfl import flower_version, paper_scale_clients, training_rows
from sensorveil.sdk.runs import read_run, train_run
from sensorveil_lab.provenance import code_version, page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASETS = {"digits": {"useful": "parity", "private": "lt5", "uji": False},
            "ujiindoorloc": {"useful": "floor", "private": "region", "uji": True}}
TSNE_ROWS = 800
# Table 2's attribute inference accuracy by lambda (tappfl.md lines 156-164). The paper has neither
# digits nor UJIIndoorLoc; for digits' binary lt5 the nearest row is CIFAR10's binary "animal or not"
# (image data too), shown as context, not as a target. None: nothing comparable.
PAPER_TABLE2 = {"digits": ("CIFAR10, animal or not", {0.0: 0.74, 0.25: 0.64, 0.5: 0.60, 0.75: 0.56, 1.0: 0.52}),
                "ujiindoorloc": None}


def dataset_clients(name: str, args) -> int:
    """--clients, or the paper's rows per device: the dataset's protocol training rows / ~326."""
    if args.clients:
        return args.clients
    spec = DATASETS[name]
    data = load_dataset(name, args.uji) if spec["uji"] else load_dataset(name)
    return paper_scale_clients(len(training_rows(data, spec["useful"], spec["private"], 0)))


def federation_settings(args, clients: int, **extra) -> dict:
    """Algorithm 1 (participation "all") and every device evaluated every round: the TAPPFLConfig defaults."""
    settings = {"clients": clients, "rounds": args.rounds, "local_epochs": args.local_epochs,
                "timeout_s": args.timeout_s, "progress": True}
    return {key: str(value) for key, value in {**settings, **extra}.items()}


def pretrain(name: str, clients: int, args, out: Path) -> Path:
    """The shared starting point: --pretrain-rounds rounds of the utility term alone, raw-data attackers
    included. The settings check refuses rounds=0 (mechanisms.base.check_setting_range), so the last of them
    is a TAPPFL round at lambda 0, whose update of f is the utility term alone as a pre-training round's is
    (eq. 7 at lambda 0); it also trains the devices' g, which the lambda runs do not inherit."""
    spec = DATASETS[name]
    return train_run("tappfl", name, data_path=args.uji if spec["uji"] else None, useful=spec["useful"],
                     private=spec["private"], out=out / f"{name}-pretrain", attacker_epochs=args.attacker_epochs,
                     settings=federation_settings(args, clients, rounds=1, lam=0.0,
                                                  pretrain_rounds=max(args.pretrain_rounds - 1, 0),
                                                  reference_attacks="true"))


def lambda_point(name: str, lam: float, clients: int, pretrained: Path, args, out: Path) -> dict:
    """One row of Table 2: train from the pre-trained f, export to ONNX, attack what the bundle emits; and
    the paper's measure (the devices' own g on their held-out rows) from the run."""
    spec = DATASETS[name]
    run_dir = train_run("tappfl", name, data_path=args.uji if spec["uji"] else None, useful=spec["useful"],
                        private=spec["private"], out=out / f"{name}-lam{lam:g}", attacker_epochs=args.attacker_epochs,
                        settings=federation_settings(args, clients, lam=lam, pretrained=pretrained,
                                                     pretrain_rounds=0, reference_attacks="false"))
    run = read_run(run_dir)
    bundle = export_run(run_dir, "onnx", out / f"{name}-lam{lam:g}-bundle", attacker_epochs=0)
    deployed = mechanisms.get("tappfl").evaluate_bundle(bundle, "onnxruntime", run_dir, run, args.attacker_epochs)
    last = run["federation"]["rounds"][-1]["train"]
    paper = {key: value for key, value in run["metrics"].items() if key.startswith("paper_")}
    return {"lam": lam, "run": str(run_dir), "bundle": str(bundle), "deployed": deployed, "trained": run["metrics"],
            "paper": paper, "wall_seconds": run["federation"]["wall_seconds"], "ce": last.get("ce"),
            "jsd": last.get("jsd"), "vclub": last.get("vclub")}


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
    clients = dataset_clients(name, args)
    pre_dir = pretrain(name, clients, args, out)
    pre = read_run(pre_dir)
    points = [lambda_point(name, lam, clients, pre_dir, args, out) for lam in args.lambdas]
    result = {"dataset": name, "useful": DATASETS[name]["useful"], "private": DATASETS[name]["private"],
              "clients": clients, "reference": pre["reference"], "pretrained": pre["metrics"], "points": points,
              "pretrain_wall_seconds": pre["federation"]["wall_seconds"],
              "partition": pre["federation"]["partition"], "seconds": round(time.time() - started, 1)}
    return result, tsne_panels(name, best_tradeoff(points), args)


def pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown(results: dict) -> str:
    settings = results["settings"]
    lines = [
        "# TAPPFL: utility against attribute inference",
        "",
        page_header(recorded(results)),
        "",
        f"Flower {results['flower']}. Setting: Algorithm 1, every device runs DeviceUpdate every round and the "
        f"server averages 10% of them (at least one); {settings['pretrain_rounds']} pre-training rounds (utility "
        f"term only), then {settings['rounds']} TAPPFL rounds, {settings['local_epochs']} local epochs, batch 10, "
        "SGD lr 0.01; IID partition, each device holding 20% of its rows out. *Test acc*: a neural probe of the "
        "primary task trained on the released representations. Privacy, two measures: *paper's measure*, each "
        "device's own privacy network g on its representation of its held-out rows, mean over devices at the end "
        "of training (Table 2's inference accuracy); *probing attackers*, the stronger of a neural attacker and "
        "extra-trees trained afresh on the released representations, which need not stop where the devices' g "
        "did. *Gap*: infer. acc minus random guessing 1/K (Table 2's baseline). Random*: the majority-class rate "
        "of the private attribute on the test rows. The probing figures are measured on the ONNX bundle's output, "
        "as a device computes it; one seed.",
        "",
    ]
    for data in results["datasets"]:
        lines += dataset_section(data)
    lines += [
        "![Table 2 and Figure 2 as plots](tappfl_results.png)",
        "",
        "![t-SNE of raw and learnt representations, coloured by the private attribute](tappfl_tsne.png)",
        "",
    ]
    return "\n".join(lines)


def paper_measure(point: dict):
    """The paper's inference accuracy of one lambda's run (None in a JSON written before it was recorded)."""
    return point.get("paper", {}).get("paper_inference_accuracy")


def dataset_section(data: dict) -> list[str]:
    ref, pre = data["reference"], data["pretrained"]
    partition = data.get("partition", {})
    table2 = PAPER_TABLE2.get(data["dataset"])
    lines = [
        f"## {data['dataset']} (private {data['private']}, useful {data['useful']})",
        "",
        f"{data.get('clients', partition.get('devices', '?'))} devices of {partition.get('rows_median', '?')} rows "
        f"(median), {partition.get('heldout', {}).get('min_per_device', '?')}+ of them held out each. Raw data "
        f"(no defence): test acc {pct(ref.get('raw_probing_acc_useful'))}, infer. acc "
        f"{pct(max(ref.get('raw_probing_acc_private', 0), ref.get('raw_tree_acc_private', 0)))}; random "
        f"guess {pct(ref['random_guess_private'])}, Random* {pct(ref['random_star'])}. Pre-trained f "
        f"(lambda not applied yet): test acc {pct(pre['probing_acc_useful'])}, infer. acc "
        f"{pct(max(pre['probing_acc_private'], pre['tree_acc_private']))}.",
        "",
        "Privacy, side by side. " + (f"The paper has no {data['dataset']} row; the Table 2 column is that of "
                                     f"{table2[0]} (the nearest), for context." if table2 else
                                     f"The paper has no {data['dataset']} row nor a comparable one."),
        "",
        "| lambda | Table 2 infer. acc | paper's measure (devices' g, held out) | probing: neural | probing: trees "
        "| Test acc |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in data["points"]:
        d, paper_row = p["deployed"], pct(table2[1].get(p["lam"])) if table2 else "-"
        lines.append(f"| {p['lam']:g} | {paper_row} | {pct(paper_measure(p))} | {pct(d['probing_acc_private'])} "
                     f"| {pct(d['tree_acc_private'])} | {pct(d['probing_acc_useful'])} |")
    lines += ["", "| lambda | Test acc | Infer. acc (neural) | Infer. acc (trees) | Gap (probing) | Gap (paper's) "
              "| devices' CE | devices' JSD | wall s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in data["points"]:
        d, paper = p["deployed"], paper_measure(p)
        paper_gap = "-" if paper is None else f"{100 * (paper - ref['random_guess_private']):+.1f}"
        lines.append(
            f"| {p['lam']:g} | {pct(d['probing_acc_useful'])} | {pct(d['probing_acc_private'])} "
            f"| {pct(d['tree_acc_private'])} | {100 * d['worst_gap_private']:+.1f} | {paper_gap} | {p['ce']:.3f} "
            f"| {p['jsd']:.3f} | {p['wall_seconds']:.0f} |"
        )
    return lines + ["", lambda_effect(data), ""]


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
    paper = [paper_measure(point) for point in (first, last)]
    moved = "" if None in paper else f", the paper's measure (devices' g) by {100 * (paper[1] - paper[0]):+.1f} points"
    return (
        f"**Finding.** From lambda {first['lam']:g} to {last['lam']:g} the probing gap moves by {gap:+.1f} points"
        f"{moved} and test acc by {utility:+.1f} points: {verdict}."
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
            label="infer. acc, probing attackers (private)",
        )
        paper = [paper_measure(p) for p in data["points"]]
        if all(value is not None for value in paper):
            top.plot(lams, paper, "^-", label="infer. acc, paper's measure (devices' g, held out)")
        table2 = PAPER_TABLE2.get(data["dataset"])
        if table2:
            top.plot(sorted(table2[1]), [table2[1][lam] for lam in sorted(table2[1])], "x:", color="black",
                     label=f"Table 2 infer. acc ({table2[0]})")
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
    parser.add_argument("--clients", type=int, default=0,
                        help="devices per dataset; 0: the paper's rows per device (tappfl.paper_scale_clients)")
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
