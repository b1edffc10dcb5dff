"""PASS's evaluation (section 5.1, appendix F.2): NAG and mNAG under the probing attack, the raw-data
references, and the releases the audit attacks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sensorveil.runtime.stages.substitution import draw_indices
from sensorveil.sdk.audit import Release
from sensorveil.sdk.evaluation import Task, baselines, probing_attack, tree_attacker_accuracy
from sensorveil.sdk.mechanisms.base import load_run_dataset
from sensorveil.sdk.mechanisms.pass_parts.bundle import hidden_of, load_bank_rows, load_head, substitution_of
from sensorveil.sdk.mechanisms.pass_parts.data import PassData, joint_code, prepare_data
from sensorveil.sdk.mechanisms.pass_parts.model import probabilities
from sensorveil.sdk.mechanisms.pass_parts.plots import plot_confusion
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.priors import maximum_entropy_distribution
from sensorveil.sdk.rundir import RunRecord
from sensorveil.sdk.training import accuracy, train_classifier

# -- evaluation (section 5.1, appendix F.2) ---------------------------------------------------
CONFUSION_PLOT = "substitution_confusion.png"
BATCH = 512


def nag(acc: float, acc_guessing: float, acc_no_suppr: float) -> float:
    """eq. 13: max(0, (Acc - Acc_guessing) / (Acc_no_suppr - Acc_guessing)); 0 when the raw-data
    classifier is no better than guessing (nothing to gain, nothing to lose)."""
    span = acc_no_suppr - acc_guessing
    return float(max(0.0, (acc - acc_guessing) / span)) if span > 0 else 0.0


def mnag(useful: list, hidden: list, private: list) -> float:
    """eq. 14: mean NAG of the useful and hidden useful attributes minus mean NAG of the private
    ones. (Eq. 14 as printed swaps M and N in the normalisers; the text defines the two averages.)"""
    kept = list(useful) + list(hidden)
    return float(np.mean(kept) - np.mean(private)) if kept and private else float("nan")


def attack_task(data: PassData, private: str) -> Task:
    """evaluation.Task for one private attribute: the attackers' rows, and the prior behind Random*."""
    useful, n_useful = joint_code(data, data.useful)
    n_private = data.classes(private)
    theta = data.dataset.prior(data.useful[0], private) if len(data.useful) == 1 else None
    return Task(x=data.x, useful=useful, private=data.labels(private), n_useful=n_useful, n_private=n_private,
                med=maximum_entropy_distribution(theta, n_useful, n_private), attacker_train=data.train_rows,
                test=data.test_rows, modality=data.dataset.modality)


def random_star(data: PassData, private: str) -> dict:
    """PR-GAN's Random* (best guess from the useful attribute and the public prior, evaluation.baselines)
    where a prior is known for a single useful attribute; otherwise the empirical best guess of the
    private label from the useful labels, learned from the training split."""
    figures = baselines(attack_task(data, private))
    known = len(data.useful) == 1 and data.dataset.prior(data.useful[0], private) is not None
    if not known:
        figures["random_star"] = figures["guess_from_useful"]
    figures["random_star_source"] = "public prior (MED, eq. 3)" if known else "empirical, from the useful labels"
    return figures


def reference(data: PassData, attacker_epochs: int, seed: int) -> tuple[dict, dict]:
    """Acc_no_suppr (a medium classifier on raw training data, scored on raw test data) and
    Acc_guessing (the training split's majority class) per attribute; the raw classifiers also give
    NAG-unfinetuned for useful attributes."""
    figures, classifiers = {}, {}
    shape = tuple(data.x.shape[1:])
    for i, attr in enumerate(data.useful + data.hidden + data.private):
        labels = data.labels(attr)
        net = make_classifier(data.dataset.modality, shape, data.classes(attr))
        torch.manual_seed(seed + i)
        train_classifier(net, data.x[data.train_rows], labels[data.train_rows], epochs=attacker_epochs,
                         desc=f"no-suppr classifier ({attr})", seed=seed + i)
        majority = np.bincount(labels[data.train_rows], minlength=data.classes(attr)).argmax()
        figures[attr] = {"acc_no_suppr": accuracy(net, data.x[data.test_rows], labels[data.test_rows]),
                         "acc_guessing": float((labels[data.test_rows] == majority).mean())}
        classifiers[attr] = net
    return figures, classifiers


def attribute_scores(data: PassData, attr: str, role: str, ref: dict, raw_net, train_x, test_x,
                     attacker_epochs: int, seed: int) -> dict:
    labels, task = data.labels(attr), attack_task(data, data.private[0])
    acc = probing_attack(task, train_x, test_x, labels, data.classes(attr), attacker_epochs, seed,
                         f"probing attacker ({attr})")
    row = {"role": role, **ref, "acc": acc, "nag": nag(acc, ref["acc_guessing"], ref["acc_no_suppr"])}
    if role == "private":
        row["tree_acc"] = tree_attacker_accuracy(train_x.numpy(), labels[data.train_rows], test_x.numpy(),
                                                 labels[data.test_rows], seed)
        row["tree_nag"] = nag(row["tree_acc"], ref["acc_guessing"], ref["acc_no_suppr"])
        row.update(random_star(data, attr))
    else:   # NAG-unfinetuned (section 5.3): the raw-data classifier, not retrained on substitutes
        row["acc_unfinetuned"] = accuracy(raw_net, test_x, labels[data.test_rows])
        row["nag_unfinetuned"] = nag(row["acc_unfinetuned"], ref["acc_guessing"], ref["acc_no_suppr"])
    return row


def confusion_matrices(data: PassData, test_probs: np.ndarray) -> dict:
    """Appendix F.2: entry (i, j) is the fraction of test samples of class i substituted by a
    substitute of class j, in expectation over P(X'|X)."""
    matrices = {}
    for attr in data.useful + data.hidden + data.private:
        k = data.classes(attr)
        bank_onehot = np.eye(k, dtype=np.float32)[data.labels(attr)[data.bank_rows]]
        per_sample = test_probs @ bank_onehot                       # P(class of x' = j | x)
        true = data.labels(attr)[data.test_rows]
        sums = np.zeros((k, k))
        np.add.at(sums, true, per_sample)
        counts = np.bincount(true, minlength=k)[:, None]
        matrices[attr] = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return matrices


def evaluate_substitution(data: PassData, positions_fn, probs_fn, attacker_epochs: int = 20, seed: int = 0,
                          plot_dir=None) -> dict:
    """All figures for one substitution mechanism. ``positions_fn(rows)`` draws one bank position per
    dataset row; ``probs_fn(rows)`` returns P(X'|X) for those rows."""
    ref, raw_nets = reference(data, attacker_epochs, seed)
    bank_x = data.x[data.bank_rows]
    train_x = bank_x[torch.as_tensor(positions_fn(data.train_rows), dtype=torch.long)]
    test_x = bank_x[torch.as_tensor(positions_fn(data.test_rows), dtype=torch.long)]
    roles = {**{a: "useful" for a in data.useful}, **{a: "hidden" for a in data.hidden},
             **{a: "private" for a in data.private}}
    rows = {attr: attribute_scores(data, attr, role, ref[attr], raw_nets[attr], train_x, test_x,
                                   attacker_epochs, seed + 10 + i)
            for i, (attr, role) in enumerate(roles.items())}
    nags = {role: [rows[a]["nag"] for a in rows if rows[a]["role"] == role] for role in ("useful", "hidden", "private")}
    worst = [max(rows[a]["nag"], rows[a]["tree_nag"]) for a in data.private]
    metrics = {"mnag": mnag(nags["useful"], nags["hidden"], nags["private"]),
               "mnag_annotated": mnag(nags["useful"], [], nags["private"]),
               "mnag_worst_attacker": mnag(nags["useful"], nags["hidden"], worst),
               "n_attacker_train": int(len(data.train_rows)), "n_test": int(len(data.test_rows)),
               "bank_size": int(len(data.bank_rows)), "attributes": rows}
    first_private, first_useful = rows[data.private[0]], rows[data.useful[0]]
    # PR-GAN's key names for the first private / useful attribute, so one table script reads both
    metrics.update(probing_acc_private=first_private["acc"], tree_acc_private=first_private["tree_acc"],
                   probing_acc_useful=first_useful["acc"])
    for attr, row in rows.items():
        metrics.update({f"nag_{attr}": row["nag"], f"acc_{attr}": row["acc"]})
        if "tree_acc" in row:
            metrics.update({f"tree_acc_{attr}": row["tree_acc"], f"random_star_{attr}": row["random_star"]})
    result = {"reference": {"original_acc_useful": ref[data.useful[0]]["acc_no_suppr"],
                            "original_acc_private": ref[data.private[0]]["acc_no_suppr"],
                            **{k: first_private[k] for k in ("random_star", "random_theta_sampling",
                                                             "guess_from_useful", "majority_private")}},
              "metrics": metrics}
    test_probs = probs_fn(data.test_rows)
    matrices = confusion_matrices(data, test_probs)
    metrics["confusion"] = {attr: m.round(4).tolist() for attr, m in matrices.items()}
    if plot_dir is not None:
        result["confusion_plot"] = str(plot_confusion(matrices, roles, data.dataset.class_names,
                                                    Path(plot_dir) / CONFUSION_PLOT))
    return result


def in_batches(fn, rows: np.ndarray) -> np.ndarray:
    return np.concatenate([fn(rows[i:i + BATCH]) for i in range(0, len(rows), BATCH)])


def evaluate_model(data: PassData, head, attacker_epochs: int = 20, seed: int = 0, plot_dir=None) -> dict:
    """Score the torch export head; substitutes drawn by the runtime's sampler (seeded: evaluation)."""
    rng = np.random.default_rng([seed, 13])

    def probs_fn(rows):
        return in_batches(lambda r: data.conditioned(probabilities(head, data.x[r]), r), rows)

    def positions_fn(rows):
        return in_batches(lambda r: draw_indices(probs_fn(r), rng), rows)
    return evaluate_substitution(data, positions_fn, probs_fn, attacker_epochs, seed, plot_dir)


def run_data(run_dir, run: RunRecord, bank_rows=None) -> PassData:
    return prepare_data(load_run_dataset(run), run.useful, run.private, hidden_of(run),
                        substitution_of(run)["bank_size"], run.config["seed"],
                        bank_rows=load_bank_rows(run_dir, run) if bank_rows is None else bank_rows,
                        condition=substitution_of(run).get("condition"))


def evaluate_pass_run(run_dir, run: RunRecord, attacker_epochs: int = 20, plot_dir=None) -> dict:
    data = run_data(run_dir, run)
    return _flat(evaluate_model(data, load_head(run_dir, run), attacker_epochs, run.config["seed"], plot_dir))


def evaluate_pass_bundle(bundle_dir, backend: str, run_dir, run: RunRecord, attacker_epochs: int = 20,
                         plot_dir=None) -> dict:
    """The probing attack on what the device emits: every substitute drawn by the runtime (index mode,
    OS entropy), mapped to the bank the bundle carries."""
    from sensorveil.runtime import Privatizer
    privatizer = Privatizer.load(bundle_dir, backend=backend, output="index")
    draw, run_model = privatizer.pipeline.stages[-1], privatizer.pipeline.run_model
    data = run_data(run_dir, run, bank_rows=draw.bank_indices)
    sensor_x = data.dataset.x

    def probs_fn(rows):
        return in_batches(lambda r: draw.conditioned(draw.probabilities(run_model(data.x[r].numpy())),
                                                     data.known(r)), rows)

    def positions_fn(rows):
        return in_batches(lambda r: privatizer(sensor_x[r], known=data.known(r)).astype(np.int64), rows)
    result = evaluate_substitution(data, positions_fn, probs_fn, attacker_epochs, run.config["seed"], plot_dir)
    return {"backend": privatizer.backend_name, **_flat(result)}


def _flat(result: dict) -> dict:
    return {**result["reference"], **result["metrics"],
            **({"confusion_plot": result["confusion_plot"]} if "confusion_plot" in result else {})}


def exact_posterior_attacker(data: PassData, private: str, train_probs: np.ndarray, test_positions: np.ndarray):
    """The Bayes attacker of a substitution mechanism: it knows P(X'|X) on the training split and the
    private labels there, so q(s | bank position i) is proportional to the sum over training rows of
    class s of P(X' = i | x); it predicts argmax_s q(s | i) for each released test position. Nothing
    an attacker could learn from the bank index alone beats it."""
    labels = data.labels(private)
    classes = data.classes(private)
    mass = np.zeros((train_probs.shape[1], classes))
    for s in range(classes):
        mass[:, s] = train_probs[labels[data.train_rows] == s].sum(axis=0)
    guesses = mass.argmax(axis=1)[test_positions]
    return lambda seed: guesses      # deterministic given the release


def pass_release(data: PassData, train_probs: np.ndarray, train_positions: np.ndarray,
                 test_positions: np.ndarray) -> Release:
    bank_x = data.x[data.bank_rows]
    private = data.private[0]
    return Release(task=attack_task(data, private),
                   train=bank_x[torch.as_tensor(train_positions, dtype=torch.long)],
                   test=bank_x[torch.as_tensor(test_positions, dtype=torch.long)],
                   useful_drawn_on_label=data.condition is not None and data.condition in data.useful,
                   extra_attackers={"exact posterior (bank index)":
                                    exact_posterior_attacker(data, private, train_probs, test_positions)})
