"""Evaluation: attackers trained on the released representations, the raw-data reference, and the
paper's own inference accuracy as the devices reported it."""
from __future__ import annotations

import dataclasses

from sensorveil.sdk.audit import Release
from sensorveil.sdk.evaluation import Task, apply_privatize, baselines, probing_attack, tree_attacker_accuracy


def representation_release(task: Task, represent) -> Release:
    """What the honest-but-curious server sees (the paper's threat model): r = f(x) for every row of
    the shared protocol, with the true labels. The task's x becomes r, so every attacker of the audit
    (sensorveil.sdk.audit) is built for a vector of the representation's width; the raw task stays beside it,
    so the audit's power attackers train on raw rows (not on r) and no re-id attacker meets r."""
    r = apply_privatize(represent, task.x)
    released = dataclasses.replace(task, x=r, modality="vector")
    return Release(task=released, train=r[task.attacker_train], test=r[task.test], raw_task=task)


def score(release: Release, attacker_epochs: int, seed: int, prefix: str = "") -> dict:
    """Table 2's figures for one release: primary-task test accuracy, attribute inference accuracy (a
    neural attacker and extra-trees, both trained on the released split) and its gap to random
    guessing 1/K, the baseline of Table 2's Gap column."""
    task, train_x, test_x = release.task, release.train, release.test
    useful = probing_attack(task, train_x, test_x, task.useful, task.n_useful, attacker_epochs, seed + 1,
                            "primary task (utility probe)")
    private = probing_attack(task, train_x, test_x, task.private, task.n_private, attacker_epochs, seed,
                             "attribute inference (neural)")
    tree = tree_attacker_accuracy(train_x.numpy(), task.private[task.attacker_train], test_x.numpy(),
                                  task.private[task.test], seed)
    guess = 1.0 / task.n_private
    figures = {"probing_acc_useful": useful, "probing_acc_private": private, "tree_acc_private": tree,
               "gap_private": private - guess, "tree_gap_private": tree - guess,
               "worst_gap_private": max(private, tree) - guess}
    return {prefix + key: value for key, value in figures.items()}


def reference_figures(task: Task) -> dict:
    """Random* and friends (evaluation.baselines) beside Table 2's random guess 1/K."""
    return {**baselines(task), "random_guess_private": 1.0 / task.n_private}


def raw_figures(task: Task, attacker_epochs: int, seed: int) -> dict:
    """The same attackers on the raw data: the 'no defence' reference."""
    return score(Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test]), attacker_epochs,
                 seed, prefix="raw_")


def paper_figures(history: list, n_private: int) -> dict:
    """The paper's attribute inference accuracy (Table 2's "average attribute inference accuracy of all
    devices"): each device's own g on f's representation of its held-out rows, averaged over the devices
    by the server (weighted by held-out rows), from @app.evaluate of each TAPPFL round. The run's figure
    is the last round's, at the end of training; None where no TAPPFL round was evaluated."""
    rounds = [entry for entry in history if entry["phase"] == "tappfl" and "evaluate" in entry
              and "paper_inference_acc" in entry["evaluate"]]
    last = rounds[-1]["evaluate"] if rounds else None
    accuracy = None if last is None else last["paper_inference_acc"]
    return {"paper_inference_accuracy": accuracy,
            "paper_gap_private": None if accuracy is None else accuracy - 1.0 / n_private,
            "paper_inference_devices": None if last is None else last["devices"],
            "paper_inference_accuracy_by_round": [entry["evaluate"]["paper_inference_acc"] for entry in rounds]}
