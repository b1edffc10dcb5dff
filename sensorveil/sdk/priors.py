"""Public prior knowledge Theta and PR-GAN's maximum entropy distribution (eq. 3), plus the
prior-only baselines every private accuracy is reported beside (Table 2's Random* row)."""
from __future__ import annotations

import numpy as np


def maximum_entropy_distribution(theta: np.ndarray | None, n_useful: int, n_private: int) -> np.ndarray:
    """MED(z|y), eq. 3: theta_y(z) where the public knows it, the remaining mass c_y spread
    uniformly (c_y / k) over the k values of z it does not. ``theta`` uses NaN for unknown entries;
    None means nothing is known, so MED is uniform."""
    if theta is None:
        return np.full((n_useful, n_private), 1.0 / n_private)
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape != (n_useful, n_private):
        raise ValueError(f"theta has shape {theta.shape}; expected ({n_useful}, {n_private})")
    known = ~np.isnan(theta)
    med = np.where(known, theta, 0.0)
    c = 1.0 - med.sum(axis=1)                     # c_y = 1 - sum of known theta_y(z)
    k = (~known).sum(axis=1)                      # k = |Z \ Z_y|
    spread = np.divide(c, k, out=np.zeros_like(c), where=k > 0)
    med = np.where(known, med, spread[:, None])
    return med / med.sum(axis=1, keepdims=True)


def prior_guess_accuracies(med: np.ndarray, useful: np.ndarray, private: np.ndarray, seed: int = 0) -> dict:
    """What an attacker knowing only the useful label and the prior achieves on these labels.

    ``random_star``: the best guess argmax_z MED(z|y), the floor a mechanism can push an attacker to.
    ``random_theta_sampling``: the expected accuracy of guessing z ~ MED(.|y), Table 2's footnote.
    """
    best = med.argmax(axis=1)[useful]
    expected = med[useful, private].mean()
    return {"random_star": float((best == private).mean()),
            "random_theta_sampling": float(expected)}


def empirical_guess_accuracy(train_useful, train_private, test_useful, test_private, n_useful, n_private) -> float:
    """Best guess of the private label from the useful label alone, learned from training counts:
    what publishing the useful attribute necessarily reveals."""
    counts = np.zeros((n_useful, n_private))
    np.add.at(counts, (train_useful, train_private), 1)
    guess = counts.argmax(axis=1)
    return float((guess[test_useful] == test_private).mean())
