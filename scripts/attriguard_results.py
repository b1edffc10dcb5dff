#!/usr/bin/env python
"""AttriGuard against its utility-loss budget beta, through the audit every mechanism's page uses, on digits
(private lt5, useful parity) and UJIIndoorLoc (private region, useful floor), written to
docs/attriguard_results.{json,md,png}. Every figure on that page comes from this script:

    python scripts/attriguard_results.py [--uji ../shared/datasets/ujiindoorloc.zip] [--uji-rows 6000]
                                         [--datasets digits ujiindoorloc] [--betas 0 1 2 4 8 16]
                                         [--seeds 3] [--attacker-epochs 10] [--out runs/attriguard-results]
    python scripts/attriguard_results.py --render-only     # the page again from docs/attriguard_results.json

Phase I (PANDA) does not depend on beta, so it runs once per split; for each beta, Phase II, the draw
and then PANDA again for the drawn value alone (PANDA is deterministic) give the released data.
Each beta's released rows are audited (sensorveil/sdk/audit.py: every attacker family over 3 seeds, 95%
intervals, the utility probe, Random*), beside the same audit on the raw rows (no mechanism) and the goal
(privacy, utility and power, "met" only when every part holds). The paper's own attacks (BA-A to LRA-A,
one seed) stay in a second table per dataset, for the comparison with the paper's Figure 4.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from sensorveil.runtime.stages.attriguard import CHUNK, draw, kkt_mechanism, panda, phase_one
from sensorveil.sdk import mechanisms
from sensorveil.sdk.audit import FAMILIES, GOAL_MARGIN, Release, audit
from sensorveil.sdk.audit_cache import RawAttackersOnce
from sensorveil.sdk.evaluation import baselines
from sensorveil.sdk.mechanisms.attriguard import attacker_suite, numpy_decide
from sensorveil.sdk.runs import read_run, train_run
from sensorveil_lab.page_text import cell, families_text
from sensorveil_lab.page_text import percent as pct
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
DATASETS = {"digits": {"useful": "parity", "private": "lt5", "path": None},
            "ujiindoorloc": {"useful": "floor", "private": "region", "path": "uji"}}
UTILITY_MARGIN = 0.05     # the utility probe on the release at most 5 points under the same probe on raw data


# ---------------------------------------------------------------------------------------------- the release
def costs(flat: np.ndarray, decide, arrays: dict, config) -> tuple[np.ndarray, np.ndarray]:
    """L0 of every r_i and whether PANDA reached i, for every sample (Phase I, chunked)."""
    l0, reached = [], []
    for start in range(0, len(flat), CHUNK):
        chunk = flat[start:start + CHUNK]
        noised, ok = phase_one(chunk, decide, arrays["weights"], arrays["bias"], config.policy, config.tau,
                               config.max_iterations)
        l0.append((noised != chunk[:, None, :]).sum(axis=2))
        reached.append(ok)
    return np.concatenate(l0), np.concatenate(reached)


def release(flat, l0, reached, decide, arrays, config, beta, rng) -> np.ndarray:
    """Phase II at this beta, one draw per sample, and the drawn r_i added (PANDA for that i alone)."""
    p = np.where(reached, arrays["target"][None, :], 0.0)
    chosen = draw(kkt_mechanism(p, l0, beta), rng)
    noised, _ = panda(flat, chosen, decide, arrays["weights"], arrays["bias"], config.policy, config.tau,
                      config.max_iterations)
    if config.policy != "modify_add":
        missing = np.flatnonzero(decide(noised) != chosen)
        noised[missing], _ = panda(flat[missing], chosen[missing], decide, arrays["weights"], arrays["bias"],
                                   "modify_add", config.tau, config.max_iterations)
    return noised


def entries_to_change_guess(l0: np.ndarray, reached: np.ndarray, guesses: np.ndarray) -> dict:
    """How much of a sample PANDA must change before the defender's classifier guesses another value: per test
    sample, the smallest L0 over the values it reached other than the current guess. The paper's rating vectors
    needed few entries; a dense signal that needs many leaves beta too small to move the attacker."""
    other = np.where(reached, l0, np.inf).astype(float)
    other[np.arange(len(other)), guesses] = np.inf
    fewest = other.min(axis=1)
    moved = fewest[np.isfinite(fewest)]
    return {"median": float(np.median(moved)) if len(moved) else None,
            "p90": float(np.percentile(moved, 90)) if len(moved) else None,
            "unreachable_share": float(1 - len(moved) / len(fewest))}


# ---------------------------------------------------------------------------------------------- the audit
def summary(result: dict) -> dict:
    """What the page keeps of one audit: every family's interval (re-id included: AttriGuard releases rows in
    the raw data's shape, so a network trained on raw rows reads them), the strongest, the utility probe,
    Random*."""
    private = result["private"]
    strongest = max(private, key=lambda name: private[name]["mean"])
    return {"private": private, "strongest_attacker": strongest, "strongest": private[strongest],
            "utility": result["useful"], "random_star": result["random_star"], "n_train": result["n_attacker_train"],
            "n_test": result["n_test"]}


def audited(task, train_x: torch.Tensor, test_x: torch.Tensor, args, cache: RawAttackersOnce) -> dict:
    return summary(audit(Release(task, train_x, test_x), seeds=args.seeds, attacker_epochs=args.attacker_epochs,
                         log=progress, cache=cache))


def raw_audit(task, args, cache: RawAttackersOnce) -> dict:
    """The raw-data rows: the same audit on the raw rows (no mechanism), and whether it has power (the
    strongest family on raw data beyond Random* + 5 points; if not, no release could show protection)."""
    cache.start(auditing_raw=True)
    raw = audited(task, task.x[task.attacker_train], task.x[task.test], args, cache)
    cache.start(auditing_raw=False)
    raw["has_power"] = raw["strongest"]["mean"] > raw["random_star"] + GOAL_MARGIN
    return raw


def goal(point: dict, raw: dict) -> dict:
    """The goal of a release, each part named; "met" only when every part holds."""
    parts = {"privacy": point["strongest"]["mean"] <= point["random_star"] + GOAL_MARGIN,
             "utility": point["utility"]["mean"] >= raw["utility"]["mean"] - UTILITY_MARGIN,
             "power": raw["has_power"]}
    verdict = "met" if all(parts.values()) else "no power" if not parts["power"] else "not met"
    return {**parts, "verdict": verdict}


def progress(line: str) -> None:
    print(f"[attriguard-results] {time.strftime('%H:%M:%S')} {line}", flush=True)


HEARTBEAT_S = 30


@contextlib.contextmanager
def heartbeat(what: str, every_s: float = HEARTBEAT_S):
    """A line every ``every_s`` seconds while a step that says nothing itself runs (training the defender,
    PANDA's Phase I, the paper's attackers: minutes each on UJIIndoorLoc), so a long run never looks hung."""
    started, done = time.time(), threading.Event()

    def beat():
        while not done.wait(every_s):
            progress(f"still {what} ({time.time() - started:.0f} s)")
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# ---------------------------------------------------------------------------------------------- running
def beta_point(name: str, beta: float, task, flat: np.ndarray, noised: dict, args, raw: dict,
               cache: RawAttackersOnce, seed: int) -> dict:
    """One beta's release: the shared audit of the released rows, the goal, and the paper's attackers."""
    shape = (-1,) + tuple(task.x.shape[1:])
    train_x, test_x = (torch.from_numpy(noised[s].reshape(shape)) for s in ("train", "test"))
    point = {"beta": beta, "expected_l0": float((noised["test"] != flat[task.test]).sum(1).mean()),
             **audited(task, train_x, test_x, args, cache)}
    point["goal"] = goal(point, raw)
    progress(f"{name} beta={beta:g}: the paper's attackers (one seed)")
    with heartbeat(f"on {name} beta={beta:g}'s paper attackers"):
        paper = attacker_suite(flat[task.attacker_train], noised["train"], noised["test"],
                               task.private[task.attacker_train], task.private[task.test], task.n_private,
                               args.attacker_epochs, seed)
    point["paper_attackers"] = {"accuracy": paper, "strongest": max(paper.values())}
    progress(f"{name} beta={beta:g}: strongest {point['strongest_attacker']} {point['strongest']['mean']:.3f}, "
             f"utility {point['utility']['mean']:.3f}, paper's strongest {max(paper.values()):.3f}, "
             f"goal {point['goal']['verdict']}")
    return point


def run_dataset(name: str, args, out: Path) -> dict:
    spec = DATASETS[name]
    started = time.time()
    options = {"max_rows": args.uji_rows} if args.uji_rows and name == "ujiindoorloc" else None
    progress(f"{name}: training AttriGuard's defender classifier")
    with heartbeat(f"training {name}'s defender"):
        run_dir = train_run("attriguard", name, data_path=args.uji if spec["path"] else None, useful=spec["useful"],
                            private=spec["private"], out=out / f"attriguard-{name}",
                            attacker_epochs=args.attacker_epochs, dataset_options=options)
    run = read_run(run_dir)
    mechanism = mechanisms.get("attriguard")
    arrays, config = mechanism.load_arrays(run_dir), mechanism.config_of(run)
    task, _ = mechanism.task(run_dir, run)
    flat = task.x.reshape(len(task.x), -1).numpy()
    decide = numpy_decide(arrays["weights"], arrays["bias"])
    rows = {"train": task.attacker_train, "test": task.test}
    progress(f"{name}: PANDA's Phase I on {len(flat)} rows")
    with heartbeat(f"in {name}'s Phase I"):
        phase_one_costs = {split: costs(flat[idx], decide, arrays, config) for split, idx in rows.items()}
    cache = RawAttackersOnce()
    progress(f"{name}: the raw rows (no mechanism)")
    raw = raw_audit(task, args, cache)
    progress(f"{name} raw rows: strongest {raw['strongest_attacker']} {raw['strongest']['mean']:.3f}, utility "
             f"{raw['utility']['mean']:.3f}, Random* {raw['random_star']:.3f}, power {raw['has_power']}")
    rng = np.random.default_rng([config.seed, 5])
    sweep = []
    for beta in args.betas:
        progress(f"{name} beta={beta:g}: releasing")
        with heartbeat(f"releasing {name} at beta={beta:g}"):
            noised = {split: release(flat[idx], *phase_one_costs[split], decide, arrays, config, beta, rng)
                      for split, idx in rows.items()}
        sweep.append(beta_point(name, beta, task, flat, noised, args, raw, cache, config.seed))
    reference = baselines(task)
    l0, reached = phase_one_costs["test"]
    return {"dataset": name, "useful": spec["useful"], "private": spec["private"], "classes": int(task.n_private),
            "n_train": int(len(task.attacker_train)), "n_test": int(len(task.test)), "config": run["config"],
            "random_star": raw["random_star"], "majority_private": reference["majority_private"], "raw": raw,
            "features": int(flat.shape[1]),
            "entries_to_change_guess": entries_to_change_guess(l0, reached, decide(flat[task.test])),
            "sweep": sweep, "seconds": round(time.time() - started, 1)}


# ---------------------------------------------------------------------------------------------- the page
def within(holds: bool) -> str:
    return "within" if holds else "NOT within"


def data_note(features: int, moved: dict) -> str:
    """The data's side of the gap to the paper: how many entries it takes to change one guess."""
    if moved["median"] is None:
        return f"{features} features; PANDA changed no test sample's guess within its iteration limit."
    return (f"{features} features; to change the defender's guess on a test sample PANDA modifies a median of "
            f"{moved['median']:g} entries (90th percentile {moved['p90']:g}; "
            f"{moved['unreachable_share']:.0%} of samples reach no other value). beta is an expected L0 per sample, "
            "so a beta well below that median leaves most guesses where they were. The paper's data differs: "
            "10,000-app rating vectors with 23.2 ratings per user, where modifying at most 4 ratings on average "
            "cut the attacker's accuracy by 75% (section 1, section 5.1).")


def intro(results: dict) -> list[str]:
    s = results["settings"]
    return [
        "beta is the expected number of modified entries (L0) per sample (eq. 3); *measured L0* is the mean "
        "over the released test rows.",
        "",
        f"**Attackers**: the audit every mechanism's page uses (sensorveil/sdk/audit.py) on each beta's released "
        f"rows: families {', '.join(FAMILIES)} (*trees+useful*: trees given the useful label too), each trained "
        "on the released training rows with the true private labels and scored on the released test rows, over "
        f"{s['seeds']} seeds, mean and 95% interval (seed spread and the test rows' binomial error); *re-id*: the "
        "neural family trained on the RAW training rows and applied to the released test rows (one seed; "
        "AttriGuard releases rows in the raw data's shape, so it applies). The exact posterior does not apply: "
        "AttriGuard releases noised rows, not a bank index. *Utility*: the audit's neural probe of the useful "
        "attribute. *Raw data*: the same audit on the raw rows (no mechanism), once per dataset. Attackers train "
        f"{s['attacker_epochs']} epochs. *Random\\**: the best guess of the private attribute from the useful "
        "label alone (P(private | useful) from the training rows), the floor an adversary who sees the useful "
        "label starts from; it is not the majority-class rate.",
        "",
        f"**Goal** of a release: *privacy*, the strongest family within {GOAL_MARGIN * 100:g} points of Random*; "
        f"*utility*, the utility probe at most {UTILITY_MARGIN * 100:g} points under the raw rows'; *power*, "
        f"the raw rows' strongest family more than {GOAL_MARGIN * 100:g} points above Random* (else no release "
        "could show protection). *met* only when all three hold; *no power* when the power part fails.",
        "",
        "**The paper's attackers** (section 5.1.2, one seed, the second table of each dataset): BA-A to LRA-A "
        "(NN-A has 512 hidden units, the paper's had 30,000), kept for the comparison with the paper's Figure 4.",
        "",
    ]


def audit_row(release: str, beta: str, l0: str, point: dict, parts: tuple) -> str:
    return (f"| {release} | {beta} | {l0} | {point['strongest_attacker']}: {cell(point['strongest'])} | "
            f"{families_text(point['private'])} | {cell(point['utility'])} | " + " | ".join(parts) + " |")


def audit_table(data: dict) -> list[str]:
    raw = data["raw"]
    lines = ["| release | beta | measured L0 | strongest attacker [95%] | every family (mean) | utility [95%] | "
             "privacy | utility | power | goal |",
             "|---|---:|---:|---|---|---|---|---|---|---|",
             audit_row("raw data (no mechanism)", "-", "-", raw,
                       (within(raw["strongest"]["mean"] <= raw["random_star"] + GOAL_MARGIN), "reference",
                        "yes" if raw["has_power"] else "no", "-"))]
    for p in data["sweep"]:
        g = p["goal"]
        lines.append(audit_row("AttriGuard", f"{p['beta']:g}", f"{p['expected_l0']:.2f}", p,
                               (within(g["privacy"]), within(g["utility"]), "yes" if g["power"] else "no",
                                g["verdict"])))
    return lines


def paper_table(data: dict) -> list[str]:
    names = list(data["sweep"][0]["paper_attackers"]["accuracy"])
    lines = ["| beta | measured L0 | " + " | ".join(names) + " | strongest of the paper's |",
             "|" + "---:|" * (len(names) + 3)]
    for p in data["sweep"]:
        accuracy = p["paper_attackers"]["accuracy"]
        lines.append(f"| {p['beta']:g} | {p['expected_l0']:.2f} | " + " | ".join(pct(accuracy[n]) for n in names)
                     + f" | {pct(p['paper_attackers']['strongest'])} |")
    return lines


def finding(data: dict) -> str:
    """Whether AttriGuard protects on this data, in words made from the figures."""
    raw, sweep = data["raw"], data["sweep"]
    met = [p for p in sweep if p["goal"]["verdict"] == "met"]
    best = min(sweep, key=lambda p: p["strongest"]["mean"])
    figures = (f"The lowest strongest attacker is {best['strongest_attacker']} at {cell(best['strongest'])}% "
               f"(beta {best['beta']:g}, measured L0 {best['expected_l0']:.2f}) against Random* "
               f"{pct(best['random_star'])} and {cell(raw['strongest'])}% on the raw rows; utility there "
               f"{cell(best['utility'])}% (raw {cell(raw['utility'])}%).")
    if not raw["has_power"]:
        verdict = ("The raw rows' strongest attacker is itself within the goal's margin of Random*: this data "
                   "cannot show whether AttriGuard protects.")
    elif met:
        verdict = ("AttriGuard protects here: the goal (privacy, utility, power) is met at beta "
                   + ", ".join(f"{p['beta']:g}" for p in met) + ".")
    else:
        private_only = [p for p in sweep if p["goal"]["privacy"]]
        verdict = ("AttriGuard does not protect here: at no beta run is the goal met"
                   + ("" if not private_only else " (privacy holds at beta "
                      + ", ".join(f"{p['beta']:g}" for p in private_only) + ", at a utility cost over the margin)")
                   + ".")
    return f"**Finding.** {figures} {verdict}"


def dataset_section(data: dict) -> list[str]:
    lines = [f"## {data['dataset']}: private {data['private']} ({data['classes']} values), useful {data['useful']}",
             "",
             f"Random* {pct(data['random_star'])}; majority class {pct(data['majority_private'])}; "
             f"{data['n_train']} training / {data['n_test']} test rows for the attackers.", ""]
    if data.get("entries_to_change_guess"):
        lines += [data_note(data["features"], data["entries_to_change_guess"]), ""]
    lines += ["### The shared audit", ""] + audit_table(data) + ["", finding(data), ""]
    lines += ["### The paper's attackers, one seed", ""] + paper_table(data) + [""]
    return lines


def markdown(results: dict) -> str:
    host = results.get("cpu") and f"{results['cpu']['model']}, {results['cpu']['logical_cores']} cores"
    lines = ["# AttriGuard: the shared audit against the utility-loss budget", "",
             page_header(recorded(results, host=host)), "", "Every figure below comes from that run.", ""]
    lines += intro(results)
    for data in results["datasets"]:
        lines += dataset_section(data)
    lines += ["![strongest attacker and utility against beta, 95% intervals](attriguard_results.png)", ""]
    return "\n".join(lines)


def errorbars(ax, betas: list, figures: list, **style) -> None:
    ax.errorbar(betas, [f["mean"] for f in figures], yerr=[[f["mean"] - f["low"] for f in figures],
                                                           [f["high"] - f["mean"] for f in figures]],
                capsize=3, **style)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results["datasets"]), figsize=(6 * len(results["datasets"]), 4.2), squeeze=False)
    for ax, data in zip(axes[0], results["datasets"]):
        betas, sweep, raw = [p["beta"] for p in data["sweep"]], data["sweep"], data["raw"]
        errorbars(ax, betas, [p["strongest"] for p in sweep], marker="s", color="C3",
                  label="strongest attacker (audit)")
        errorbars(ax, betas, [p["utility"] for p in sweep], marker="o", color="C2", label="utility probe (audit)")
        ax.plot(betas, [p["paper_attackers"]["strongest"] for p in sweep], "^:", color="C0",
                label="strongest of the paper's attackers (one seed)")
        ax.axhline(raw["strongest"]["mean"], color="C3", ls="-.", lw=0.8, label="raw rows, strongest")
        ax.axhline(raw["utility"]["mean"], color="C2", ls="-.", lw=0.8, label="raw rows, utility")
        ax.axhline(data["random_star"], color="grey", ls="--", label="Random*")
        ax.set(xlabel="utility-loss budget beta (expected L0)", ylabel="accuracy", ylim=(0, 1.02),
               title=f"{data['dataset']}: private {data['private']}, useful {data['useful']}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uji", default=str(SHARED / "datasets" / "ujiindoorloc.zip"))
    parser.add_argument("--uji-rows", type=int, default=None,
                        help="a stratified subset of UJIIndoorLoc's rows (default: all 21,048), for a shorter run")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--betas", nargs="+", type=float, default=[0, 1, 2, 4, 8, 16])
    parser.add_argument("--seeds", type=int, default=3, help="the audit's seeds")
    parser.add_argument("--attacker-epochs", type=int, default=10)
    parser.add_argument("--out", default="runs/attriguard-results")
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite attriguard_results.md from the JSON of the last run (no training)")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    docs = Path(args.docs)
    if args.render_only:
        results = json.loads((docs / "attriguard_results.json").read_text())
        (docs / "attriguard_results.md").write_text(markdown(results))
        return
    require_clean(args.allow_dirty)
    # the attackers are small networks and sklearn models: one torch thread each runs them fastest on a busy
    # machine (more threads than free cores made an epoch several times slower)
    torch.set_num_threads(1)
    record = provenance(allow_dirty=args.allow_dirty)   # the commit and date the run starts from
    from sensorveil.benchmarks.report import cpu_description

    results = {"command": "python scripts/attriguard_results.py " + " ".join(sys.argv[1:]),
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_description(),
               "attacker_epochs": args.attacker_epochs,
               "settings": {"seeds": args.seeds, "attacker_epochs": args.attacker_epochs, "betas": args.betas},
               "goal": {"privacy_margin": GOAL_MARGIN, "utility_margin": UTILITY_MARGIN}, "datasets": []}
    for name in args.datasets:
        results["datasets"].append(run_dataset(name, args, Path(args.out)))
        progress(f"{name} done in {results['datasets'][-1]['seconds']:.0f} s")
    results["provenance"] = record
    results = portable(results, shared=SHARED)
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "attriguard_results.json").write_text(json.dumps(results, indent=2, default=float) + "\n")
    (docs / "attriguard_results.md").write_text(markdown(results))
    plot(results, docs / "attriguard_results.png")
    print(f"wrote {docs / 'attriguard_results.md'}")


if __name__ == "__main__":
    main()
