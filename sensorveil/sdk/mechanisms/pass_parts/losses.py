"""PASS's training loss: eq. 3-8, and eq. 10's constant C of the bound on L."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


# -- the loss, eq. 3-8 --------------------------------------------------------------------------
def row_entropy(log_p: torch.Tensor) -> torch.Tensor:
    return -(log_p.exp() * log_p).sum(-1)


def private_loss(log_p: torch.Tensor, s: torch.Tensor, n_classes: int) -> torch.Tensor:
    """eq. 4: L_S = -E_{P(S)}[H(X'|S)], with eq. 5's P(X'|S=c) the mean of P(X'|x) over the batch's
    x of class c, and P(S=c) the batch share of class c. All classes at once: one (classes x batch)
    by (batch x bank) product instead of a loop, since attributes such as regions have 100+ classes."""
    onehot = F.one_hot(s, n_classes).T.to(log_p.dtype)                   # (classes, batch)
    counts = onehot.sum(1)
    present = counts > 0
    mix = (onehot[present] @ log_p.exp()) / counts[present, None]         # P(X'|S=c), eq. 5
    entropy = -(mix * torch.log(mix.clamp_min(1e-30))).sum(1)            # H(X'|S=c)
    return -(counts[present] / len(s) * entropy).sum()


def useful_loss(log_p: torch.Tensor, u: torch.Tensor, bank_u: torch.Tensor, n_classes: int) -> torch.Tensor:
    """eq. 6: L_U = log|U| E[-log P(U'=U|X)], with eq. 7's P(U'=u|x) = sum of P(x'|x) over the
    substitutes x' whose own label U' is u."""
    match = bank_u[None, :] == u[:, None]
    covered = match.any(1)                                   # a class absent from the bank has no x'
    log_pu = torch.logsumexp(log_p[covered].masked_fill(~match[covered], float("-inf")), dim=1)
    return math.log(n_classes) * (-log_pu).mean()


def general_loss(log_p: torch.Tensor) -> torch.Tensor:
    """eq. 8: L_X = E[H(X'|X)]."""
    return row_entropy(log_p).mean()


def pass_loss(log_p, private: list, private_classes: list, useful: list, bank_useful: list, useful_classes: list,
              lam: float, mu: float) -> tuple[torch.Tensor, dict]:
    """eq. 3 combined with the signs of its derivation (eq. 29 and 37): L = sum L_S + lambda sum L_U
    + mu L_X. Eq. 3 as printed subtracts the last two terms, but section 4.2 minimises L_U and L_X
    and eq. 37 bounds L by E[L_S] + lambda E[L_U] + mu E[L_X] + C, so they are added here."""
    l_s = sum((private_loss(log_p, s, k) for s, k in zip(private, private_classes)), log_p.new_zeros(()))
    l_u = sum((useful_loss(log_p, u, bu, k) for u, bu, k in zip(useful, bank_useful, useful_classes)),
              log_p.new_zeros(()))
    l_x = general_loss(log_p)
    total = l_s + lam * l_u + mu * l_x
    parts = {"L_hat": total, "L_S": l_s, "L_U": l_u, "L_X": l_x}
    return total, {name: float(value.detach()) for name, value in parts.items()}


def constant_c(n_private: int, mu: float, lam: float, bank_size: int, useful_labels: list) -> float:
    """eq. 10: C = (M - mu) log|D_substitute| - lambda sum_j H(U_j) + lambda N, so E[L_hat] + C >= L
    (eq. 9). Entropies in nats. Eq. 10 prints "+ lambda", which is eq. 29's lambda sum_j 1 for N = 1;
    for N useful attributes the derivation gives lambda N."""
    entropies = []
    for labels in useful_labels:
        p = np.bincount(labels) / len(labels)
        p = p[p > 0]
        entropies.append(float(-(p * np.log(p)).sum()))
    return (n_private - mu) * math.log(bank_size) - lam * sum(entropies) + lam * len(useful_labels)
