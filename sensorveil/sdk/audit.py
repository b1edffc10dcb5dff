"""The privacy audit: what fresh attackers learn from the released output, by attacker family, repeated
over seeds, every figure with a 95% interval. It is what `sensorveil evaluate` prints and writes.

An attacker trains on the released (privatized) training split with the true private labels and is
scored on the released test split (the probing attack of PASS section 5.1). Families:

* ``neural``:        the task's classifier architecture (PR-GAN Table 1), the defender's own family;
* ``trees``:         an extra-trees ensemble on the flattened output (pooled 4x4 for depth frames);
* ``logistic``:      multinomial logistic regression, a linear attacker (AttriGuard's LR-A);
* ``trees+useful``:  trees given the published useful label as well: PR-GAN's threat model gives the
                     adversary y, so what y alone reveals (Random*) is the floor, not zero;
* mechanism-specific attackers a mechanism adds (PASS: the exact posterior q(s | bank index));
* ``re-id``:         with ``neural``, and where the release has the raw data's shape: the neural family trained
                     on the RAW training split and applied to the released test split (one seed);
* ``re-id omni-scale``: the same with an OSNet-like re-identification network trained from scratch on the RAW
                     crops (sensorveil/sdk/reid_network.py), for camera crops of 32 px a side or more.

Raw-data rows: every family, and the utility probe, trained once (seed 0) on the RAW training split and scored on
the raw test split: the audit's power (could any release be shown to protect?) and the utility a release is
weighed against. For a release in another space (TAPPFL's representation) ``Release.raw_task`` names the raw rows.

The interval of a family's mean accuracy over R seeds on n test rows combines the seed-to-seed
spread and the test sample's binomial error: mean +- 1.96 sqrt(s^2 / R + p (1 - p) / n).

A split by time (the camera clip) can hold the private classes in other shares than the training
part, and Random* (the best guess from the useful label under the training part's prior) is then no
floor: an attacker that spreads its guesses can beat it on a release that says nothing but the
useful label. A release with ``test_weights`` (:func:`label_shift_weights`) is scored on the test
rows reweighted to the training part's P(private | useful), the standard label-shift correction, so
Random* is again the best any guess from the useful label can do; the plain scores are kept beside
("unweighted"), and the binomial error uses the weights' effective sample size.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sensorveil.sdk.evaluation import Task, baselines, pooled_features, tree_attacker_predictions
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.training import predict, train_classifier

FAMILIES = ("neural", "trees", "logistic", "trees+useful")
# how an attacker trained on the RAW rows is named, and one of them also scored on the release (audit_cache
# reads these names back)
RAW_DATA, AND_REID = "raw-data ", " (and re-id)"
REID = "re-id"          # the neural family trained on RAW data, scored on the release (with "neural", one seed)
REID_OMNI = "re-id omni-scale"    # an OSNet-like network trained on RAW camera crops, scored on the release
OMNI_MIN_SIDE = 32      # crops smaller than this (digits' 8x8) are no camera people: the network is not run
GOAL_MARGIN = 0.05      # the product's goal: the strongest attacker within 5 points of Random*


@dataclass
class Release:
    """What an attacker sees: the released training and test splits (model units), with the labels."""
    task: Task
    train: torch.Tensor
    test: torch.Tensor
    extra_attackers: dict = field(default_factory=dict)   # name -> callable(seed) -> test predictions
    fixed: dict | None = None      # the defender's fixed classifiers (PR-GAN's D_y, D_z), if it has any
    test_weights: np.ndarray | None = None    # per test row (label_shift_weights); None: plain accuracy
    # the task on the RAW rows where ``task.x`` holds something else (TAPPFL's representation r): the audit's
    # power attackers train on raw rows, never on the release's own space; None: ``task`` holds the raw rows
    raw_task: Task | None = None
    # each released row was drawn among the bank's rows of its own useful label (PASS conditioned on it): the
    # utility probe then reads that label back from the draw, which says the draw kept its condition, no more
    useful_drawn_on_label: bool = False

    def raw(self) -> Task:
        """The task whose x is the raw data, with the same labels and splits as ``task``."""
        return self.task if self.raw_task is None else self.raw_task


# pseudo-count per (useful, private) cell of the training part's shares: a class the training part never
# shows still weighs something, so a leak on exactly those rows is counted (with raw counts it weighed 0)
SHARE_PSEUDOCOUNT = 0.5


def label_shift_weights(task: Task) -> np.ndarray:
    """Per test row, P_train(z | u) / P_test(z | u) from the two splits' counts, mean 1: the test rows
    reweighted so each useful label's private classes come in the training part's shares. The training
    shares carry a pseudo-count of SHARE_PSEUDOCOUNT per cell, so no test row weighs 0."""
    def shares(rows, pseudocount):
        counts = np.full((task.n_useful, task.n_private), pseudocount)
        np.add.at(counts, (task.useful[rows], task.private[rows]), 1.0)
        return counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
    useful, private = task.useful[task.test], task.private[task.test]
    weights = shares(task.attacker_train, SHARE_PSEUDOCOUNT)[useful, private] / shares(task.test, 0.0)[useful, private]
    return weights * len(weights) / weights.sum()


def effective_rows(weights: np.ndarray | None, n: int) -> float:
    """Kish's effective sample size of weighted rows (n without weights)."""
    return float(n) if weights is None else float(weights.sum() ** 2 / (weights ** 2).sum())


def score(guesses: np.ndarray, truth: np.ndarray, weights: np.ndarray | None = None) -> float:
    hits = (np.asarray(guesses) == np.asarray(truth)).astype(np.float64)
    return float(hits.mean() if weights is None else (hits * weights).sum() / weights.sum())


def interval(accuracies: list, n_test: int) -> dict:
    """Mean accuracy over seeds with its 95% interval (seed spread + test-set binomial error)."""
    runs = np.asarray(accuracies, dtype=np.float64)
    mean = float(runs.mean())
    spread = float(runs.var(ddof=1)) / len(runs) if len(runs) > 1 else 0.0
    half = 1.96 * math.sqrt(spread + mean * (1 - mean) / max(n_test, 1))
    return {"mean": mean, "low": max(0.0, mean - half), "high": min(1.0, mean + half),
            "runs": [float(a) for a in runs]}


def flat_features(x: np.ndarray) -> np.ndarray:
    """One row per sample; large images pooled 4x4 so linear and tree attackers stay tractable."""
    return pooled_features(x)


def attack(family: str, release: Release, labels: np.ndarray, classes: int, epochs: int, seed: int) -> np.ndarray:
    """One attacker of ``family`` trained on the released training split: its guesses on the test split."""
    task = release.task
    train_y = labels[task.attacker_train]
    if family == "neural":
        net = make_classifier(task.modality, task.model_shape, classes)
        torch.manual_seed(seed)
        train_classifier(net, release.train, train_y, epochs=epochs, desc=f"audit neural (seed {seed})",
                         seed=seed)
        return predict(net, release.test)
    train_x, test_x = flat_features(release.train.numpy()), flat_features(release.test.numpy())
    if family == "trees":
        return tree_attacker_predictions(train_x, train_y, test_x, seed)
    if family == "trees+useful":
        useful = np.eye(task.n_useful, dtype=np.float32)
        return tree_attacker_predictions(np.hstack([train_x, useful[task.useful[task.attacker_train]]]), train_y,
                                         np.hstack([test_x, useful[task.useful[task.test]]]), seed)
    if family == "logistic":
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression
        model = LogisticRegression(max_iter=300, random_state=seed)
        # a linear probe on a fixed budget: on 8,192-pixel camera crops lbfgs stops before it converges,
        # and sklearn's warning (one per seed, nine lines each) buried the quickstart's own output
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return model.fit(train_x, train_y).predict(test_x)
    raise ValueError(f"unknown attacker family {family!r}; expected one of {FAMILIES}")


class AttackerProgress:
    """Runs one attacker and says so: 'audit: 4/15 trees attacker, seed 1 (3 s)'; with a ``cache``
    (sdk/audit_cache.AttackerCache), an attacker it already holds is read, not trained again."""

    def __init__(self, total: int, log=None, cache=None):
        self.total, self.done, self.log, self.cache = total, 0, log, cache

    def __call__(self, name: str, seed: int, run):
        started = time.perf_counter()
        result = None if self.cache is None else self.cache.get(name, seed)
        resumed = result is not None
        if not resumed:
            result = run()
            if self.cache is not None:
                self.cache.put(name, seed, result)
        self.done += 1
        if self.log is not None:
            how = "read from the audit cache" if resumed else f"{time.perf_counter() - started:.0f} s"
            self.log(f"audit: {self.done}/{self.total} {name} attacker, seed {seed} ({how})")
        return result


def audit(release: Release, seeds: int = 3, attacker_epochs: int = 20, families=FAMILIES, log=None,
          cache=None) -> dict:
    """Every family against the private attribute, the neural probe on the useful one, each over
    ``seeds`` seeds with its interval, beside Random* and the goal's verdict. ``log``: called with one
    line per attacker trained (an audit takes minutes; a silent one looks hung). ``cache``: an
    AttackerCache for this release, so a stopped audit resumes."""
    if seeds < 1:
        raise ValueError(f"the audit needs at least 1 seed, got {seeds}")
    task = release.task
    private_test, useful_test = task.private[task.test], task.useful[task.test]
    omni = wants_omni_scale(release)
    progress = AttackerProgress((len(families) + len(release.extra_attackers) + 1) * seeds + len(families) + omni + 1,
                                log, cache)
    guesses = {family: [progress(family, seed, lambda: attack(family, release, task.private, task.n_private,
                                                               attacker_epochs, seed))
                        for seed in range(seeds)] for family in families}
    for name, run_attacker in release.extra_attackers.items():
        guesses[name] = [progress(name, seed, lambda: run_attacker(seed)) for seed in range(seeds)]
    useful_guesses = [progress("utility probe", seed, lambda: attack("neural", release, task.useful, task.n_useful,
                                                                     attacker_epochs, 100 + seed))
                      for seed in range(seeds)]
    raw_guesses = raw_attackers(release, families, attacker_epochs, progress, guesses)
    raw_useful_guesses = raw_utility_probe(release, attacker_epochs, progress)
    reference = baselines(task)
    best_from_useful = task.med.argmax(axis=1)[useful_test]       # Random*'s guess

    def scored(weights):
        n = effective_rows(weights, len(task.test))
        private = {name: interval([score(g, private_test, weights) for g in runs], n) for name, runs in guesses.items()}
        return {"private": private, "useful": interval([score(g, useful_test, weights) for g in useful_guesses], n),
                "random_star": score(best_from_useful, private_test, weights), "n_effective": n,
                "raw_private": {name: interval([score(g, private_test, weights)], n)
                                for name, g in raw_guesses.items()},
                "raw_useful": interval([score(raw_useful_guesses, useful_test, weights)], n)}
    result = scored(release.test_weights)
    strongest = max(result["private"], key=lambda name: result["private"][name]["mean"])
    goal_met = result["private"][strongest]["mean"] <= result["random_star"] + GOAL_MARGIN
    out = {"seeds": seeds, "attacker_epochs": attacker_epochs, "n_attacker_train": int(len(task.attacker_train)),
           "n_test": len(task.test), **result, "majority_private": reference["majority_private"],
           "strongest_attacker": strongest,
           "goal": {"strongest_within_5_points_of_random_star": goal_met, "margin": GOAL_MARGIN},
           "power": audit_power(result, goal_met)}
    out["verdict"] = out["power"]["verdict"]
    if release.useful_drawn_on_label:
        out["useful_drawn_on_label"] = True
    if release.test_weights is not None:
        out["scoring"] = "test rows reweighted to the training part's P(private | useful) (label shift)"
        out["unweighted"] = scored(None)
        out["zero_weight_rows"] = int(np.count_nonzero(release.test_weights <= 0))
    return out


def raw_attackers(release: Release, families, attacker_epochs: int, progress, guesses: dict) -> dict:
    """Each family trained on the RAW training split (seed 0), scored on the raw test split: the audit's power.
    Where the release is in the raw data's space, the raw-trained networks also meet the release: the re-id
    attackers, added to ``guesses``."""
    task = release.raw()
    raw = Release(task, task.x[task.attacker_train], task.x[task.test])
    raw_guesses = {}
    for family in families:
        if family == "neural" and in_raw_space(release):    # one net: the raw reference and the re-id attacker
            raw_guesses[family], reid = progress(RAW_DATA + "neural" + AND_REID, 0,
                                                 lambda: raw_trained_neural(raw, release, attacker_epochs))
            guesses[REID] = [reid]
        else:
            raw_guesses[family] = progress(RAW_DATA + family, 0, lambda: attack(
                family, raw, task.private, task.n_private, attacker_epochs, 0))
    if wants_omni_scale(release):
        raw_guesses["omni-scale"], reid = progress(RAW_DATA + "omni-scale" + AND_REID, 0, lambda: raw_trained_neural(
            raw, release, attacker_epochs, network=omni_scale_network))
        guesses[REID_OMNI] = [reid]
    return raw_guesses


def raw_utility_probe(release: Release, attacker_epochs: int, progress):
    """The utility probe trained and scored on the RAW rows (seed 0): the utility a release is weighed against,
    the raw-data row every page shows beside the attackers' one."""
    task = release.raw()
    raw = Release(task, task.x[task.attacker_train], task.x[task.test])
    return progress(RAW_DATA + "utility probe", 0, lambda: attack("neural", raw, task.useful, task.n_useful,
                                                                attacker_epochs, 100))


def wants_omni_scale(release: Release) -> bool:
    """Camera crops in the raw data's space: the OSNet-like re-id network applies."""
    task = release.raw()
    return task.modality == "image" and in_raw_space(release) and min(task.model_shape[-2:]) >= OMNI_MIN_SIDE


def omni_scale_network(task: Task) -> torch.nn.Module:
    from sensorveil.sdk.reid_network import omni_scale_reid
    return omni_scale_reid(task.model_shape[0], task.n_private)


def in_raw_space(release: Release) -> bool:
    """Whether the release has the raw data's shape, so an attacker trained on raw data can read it (not so for
    a representation or a bank index). A release that names a raw task is in another space by its own word, even
    where its width happens to match the raw rows'."""
    return release.raw_task is None and tuple(release.test.shape[1:]) == tuple(release.task.x.shape[1:])


def raw_trained_neural(raw: Release, release: Release, epochs: int, network=None) -> tuple:
    """The neural family (or ``network(task)``) trained once on the RAW training split (seed 0): its guesses on
    the raw test split (the audit's power) and on the released test split: the re-identification attacker,
    who learnt people as the camera saw them and meets the release. One seed, so its interval is binomial
    only."""
    task = raw.task
    net = network(task) if network is not None else make_classifier(task.modality, task.model_shape, task.n_private)
    torch.manual_seed(0)
    train_classifier(net, raw.train, task.private[task.attacker_train], epochs=epochs,
                     desc="audit raw-data neural", seed=0)
    return predict(net, raw.test), predict(net, release.test)


def audit_power(result: dict, goal_met: bool) -> dict:
    """Can this audit tell? The same families trained on the RAW data of the same split (one seed each):
    if even raw data keeps the strongest of them within the goal's margin of Random*, a release that
    meets the goal proves nothing, and the verdict says so instead of "protects"."""
    raw = result["raw_private"]
    raw_strongest = max(raw, key=lambda name: raw[name]["mean"])
    has_power = raw[raw_strongest]["mean"] > result["random_star"] + GOAL_MARGIN
    verdict = "leaks" if not goal_met else "protects" if has_power else "no power on this data"
    return {"raw_strongest_attacker": raw_strongest, "raw_strongest_accuracy": raw[raw_strongest]["mean"],
            "has_power": has_power, "verdict": verdict, "raw_seeds": 1}


def format_audit(result: dict, title: str) -> str:
    """The audit as a table that fits 100 columns."""
    def cell(figure):
        return f"{figure['mean']:6.1%}  [{figure['low']:6.1%}, {figure['high']:6.1%}]"
    lines = [title, f"  {'attacker (private attribute)':34s} accuracy  [95% interval]"]
    for name, figure in result["private"].items():
        marker = "  <- strongest" if name == result["strongest_attacker"] else ""
        lines.append(f"  {name:34s} {cell(figure)}{marker}")
    if "unweighted" in result:
        plain = result["unweighted"]
        best = max(plain["private"], key=lambda name: plain["private"][name]["mean"])
        lines += [f"  {'plain test rows, strongest':34s} {cell(plain['private'][best])}  ({best})",
                  f"  {'plain test rows, Random*':34s} {plain['random_star']:6.1%}  (no floor there)"]
    lines += [f"  {'Random* (useful label + prior)':34s} {result['random_star']:6.1%}",
              f"  {'utility probe (useful attribute)':34s} {cell(result['useful'])}"
              + ("  (read back: each row drawn on its label)" if result.get("useful_drawn_on_label") else ""),
              *([f"  {'the same probe on RAW data':34s} {cell(result['raw_useful'])}  (one seed)"]
                if "raw_useful" in result else []),       # audits written before it have none
              f"  {result['seeds']} seeds x {result['attacker_epochs']} attacker epochs, "
              f"{result['n_attacker_train']} training / {result['n_test']} test rows"
              + (f" (reweighted for the split by time: {result['n_effective']:.0f} effective)"
                 if "unweighted" in result else ""),
              "  goal (strongest attacker <= Random* + 5 points): "
              + ("met" if result["goal"]["strongest_within_5_points_of_random_star"] else "NOT met")]
    power = result.get("power")
    if power:      # audits written before the power check have none
        lines += [f"  {'same attackers on RAW data, strongest':34s} {power['raw_strongest_accuracy']:6.1%}  "
                  f"({power['raw_strongest_attacker']}, one seed)",
                  f"  verdict: {power['verdict']}" + ("" if power["has_power"] else
                                                     " (raw data would meet the goal too: this data cannot "
                                                     "show whether the mechanism protects)")]
    return "\n".join(lines)


def write_report(result: dict, title: str, markdown_path) -> Path:
    """A markdown page with the table and a privacy-utility plot beside it (same stem, .png)."""
    markdown_path = Path(markdown_path)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    plot = plot_privacy_utility(result, markdown_path.with_suffix(".png"))
    markdown_path.write_text(f"# {title}\n\nWritten by `sensorveil evaluate ... --report {markdown_path.name}`.\n\n"
                             f"```\n{format_audit(result, title)}\n```\n\n![privacy and utility]({plot.name})\n")
    return markdown_path


def plot_privacy_utility(result: dict, path: Path) -> Path:
    """One row per attacker family (its 95% interval on the private attribute, beside Random* and the
    goal's band), so families with close figures do not hide one another; the utility probe is the
    last row, on its own axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(result["private"])
    fig, (ax, util) = plt.subplots(2, 1, figsize=(6.4, 1.2 + 0.45 * len(names) + 1.0),
                                   gridspec_kw={"height_ratios": [len(names), 1.2]})
    for row, name in enumerate(names):
        _interval_row(ax, row, result["private"][name], "C0")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.axvline(result["random_star"], color="grey", linestyle="--", label="Random*")
    ax.axvspan(result["random_star"], result["random_star"] + GOAL_MARGIN, color="green", alpha=0.1,
               label="goal: within 5 points")
    ax.set_xlabel("attacker accuracy on the private attribute (lower is more private)")
    ax.legend(fontsize=7, loc="best")
    ax.set_title("each attacker family, 95% intervals over seeds", fontsize=9)
    _interval_row(util, 0, result["useful"], "C2")
    util.set_yticks([0], ["utility probe"])
    util.set_xlabel("neural probe accuracy on the useful attribute (higher is more useful)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _interval_row(ax, row: int, figure: dict, color: str) -> None:
    ax.errorbar(figure["mean"], row, xerr=[[figure["mean"] - figure["low"]], [figure["high"] - figure["mean"]]],
                fmt="o", capsize=3, color=color)
