"""Sanitizer's beta (eq. 1, > 1) and alphas (eq. 5) chosen on a validation split carved from the training rows.

alpha1 = 1 sets the scale of eq. 5; beta and (alpha2, alpha3, alpha4) come from the config's grids. Each
candidate trains the alpha-beta-VAE (eq. 5) on the fitting part of the training rows, fits the configured
mechanism (section 3.1) on that part's released z_S, releases both parts, and is scored on the validation
part by the normalized hyper-volume (the paper's Table 1 measure) of its (leakage, utility) point: leakage
and utility are the accuracies of extra-trees attackers trained on the released fitting part with the
private and the useful labels. The highest score wins (the first candidate on a tie). Only the row indices
passed in are read: the test rows are never an argument here.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from sensorveil.sdk.datasets.base import stratified_slices
from sensorveil.sdk.evaluation import Task, apply_privatize, tree_attacker_predictions
from sensorveil.sdk.mechanisms.sanitizer_parts.model import fit
from sensorveil.sdk.mechanisms.sanitizer_parts.release import (
    fit_parameters,
    make_privatize,
    normalized_hypervolume,
)

VALIDATION_SHARE = 5      # one part in five of the training rows, stratified by (useful, private)
CRITERION = ("normalized hyper-volume of (leakage, utility) on the validation rows, each an extra-trees "
             "attacker trained on the released fitting rows")


def validation_split(task: Task, rows: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fitting rows, validation rows): a stratified fifth of ``rows`` held out, the rest to fit."""
    rows = np.asarray(rows)
    strata = task.useful[rows] * task.n_private + task.private[rows]
    parts = stratified_slices(strata, VALIDATION_SHARE, seed + 7)
    return rows[np.concatenate(parts[1:])], rows[parts[0]]


def candidates(config) -> list[dict]:
    """Every (beta, alpha1 = 1, alpha2, alpha3, alpha4) of the grids; beta must exceed 1 (a beta-VAE)."""
    if any(float(beta) <= 1 for beta in config.beta_grid):
        raise ValueError(f"sanitizer: every beta in beta_grid must exceed 1 (eq. 1's beta-VAE); "
                         f"got {tuple(config.beta_grid)}")
    return [{"beta": float(beta), "alpha1": 1.0, "alpha2": float(a2), "alpha3": float(a3), "alpha4": float(a4)}
            for beta in config.beta_grid for a2, a3, a4 in config.alpha_grid]


def trees_accuracy(train_x, train_y, test_x, test_y, seed: int) -> float:
    guesses = tree_attacker_predictions(train_x.numpy(), train_y, test_x.numpy(), seed)
    return float((guesses == test_y).mean())


def score(task: Task, fit_rows, val_rows, config, epochs: int, step: float) -> dict:
    """One candidate (``config`` carries its beta and alphas): its validation leakage, utility and score."""
    encoder, decoder, _, _ = fit(task, fit_rows, config, epochs)
    params = fit_parameters(encoder, task.x[fit_rows], config)
    privatize = make_privatize(encoder, decoder, config.sensitive_dim, config.mechanism, params, step,
                               config.seed, config.release)
    fit_out, val_out = apply_privatize(privatize, task.x[fit_rows]), apply_privatize(privatize, task.x[val_rows])
    leakage = trees_accuracy(fit_out, task.private[fit_rows], val_out, task.private[val_rows], config.seed)
    utility = trees_accuracy(fit_out, task.useful[fit_rows], val_out, task.useful[val_rows], config.seed)
    return {"leakage": leakage, "utility": utility, "score": normalized_hypervolume([(leakage, utility)])}


def choose(task: Task, rows: np.ndarray, config, epochs: int, step: float, scorer=score) -> tuple[dict, dict]:
    """(the chosen beta and alphas, the record run.json keeps: the grid with each candidate's validation
    figures, the rows' counts and the criterion). One candidate is taken as it is, without a search."""
    grid = candidates(config)
    fit_rows, val_rows = validation_split(task, rows, config.seed)
    record = {"criterion": CRITERION, "fitting_rows": int(len(fit_rows)), "validation_rows": int(len(val_rows)),
              "alpha1": "fixed at 1 (the scale of eq. 5)", "grid": []}
    if len(grid) == 1:
        record["grid"] = [{**grid[0], "validation": None}]
        return grid[0], {**record, "chosen": grid[0], "searched": False}
    for values in grid:
        figures = scorer(task, fit_rows, val_rows, replace(config, progress=False, **values), epochs, step)
        record["grid"].append({**values, "validation": figures})
    best = max(range(len(grid)), key=lambda i: (record["grid"][i]["validation"]["score"], -i))
    return grid[best], {**record, "chosen": grid[best], "searched": True}
