"""The paper's bounds: eq. 2's I_vCLUB, eq. 3's condition on g_Psi, the JSD estimate of eq. 5-6, and
eq. 7's objective that f descends."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk.mechanisms.tappfl_parts.config import LocalSettings
from sensorveil.sdk.mechanisms.tappfl_parts.model import DeviceNetworks


# -- the bounds --------------------------------------------------------------------------------
def vclub_upper_bound(logits: torch.Tensor, u: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """Eq. 2: E_p(r,u)[log q(u|r)] - E_p(r)p(u)[log q(u|r)]. With u discrete the second expectation is
    exact: sum_k p(k) log q(k|r), averaged over the batch's r."""
    log_q = F.log_softmax(logits, dim=1)
    joint = log_q.gather(1, u[:, None]).mean()
    marginal = (log_q @ prior.to(log_q.dtype)).mean()
    return joint - marginal


def privacy_condition_loss(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Eq. 3: max_Psi E_p(r,u)[log q_Psi(u|r)], minimised as the cross-entropy of g_Psi (the condition
    under eq. 2 that makes I_vCLUB an upper bound)."""
    return F.cross_entropy(logits, u)


def jsd_mutual_information(h: nn.Module, x: torch.Tensor, x_bar: torch.Tensor, r: torch.Tensor,
                           u: torch.Tensor) -> torch.Tensor:
    """The JSD estimate of "Implementation in practice" (eq. 5-6's lower bound):
    E[-sp(-h(x, r, u))] - E[sp(h(x_bar, r, u))]. Its supremum over h is 2 JSD(joint || product) - 2 log 2."""
    return (-F.softplus(-h(x, r, u))).mean() - F.softplus(h(x_bar, r, u)).mean()


def negatives(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """x_bar: each row paired with another row of the batch (a random cyclic shift), i.e. an independent
    draw from the device's data."""
    shift = int(torch.randint(1, len(x), (1,), generator=generator))
    return torch.roll(x, shifts=shift, dims=0)


# -- eq. 7, the objective of Theta ---------------------------------------------------------------
def privacy_term(nets: DeviceNetworks, r: torch.Tensor, u: torch.Tensor, prior: torch.Tensor, bound: str):
    """What f minimises for privacy: eq. 2's I_vCLUB, or eq. 4/7's -CE (the adversarial form)."""
    logits = nets.g(r)
    if bound == "vclub":
        return vclub_upper_bound(logits, u, prior)
    return -privacy_condition_loss(logits, u)


def theta_objective(nets: DeviceNetworks, r, x, x_bar, u, prior, settings: LocalSettings) -> tuple:
    """What f descends (eq. 7 turned into a loss): lambda * privacy - (1 - lambda) * I_JSD, with the
    privacy term of eq. 2 (or eq. 4's -CE); the utility term alone while pre-training.
    Returns (loss, privacy term or None, utility term)."""
    utility = jsd_mutual_information(nets.h, x, x_bar, r, u)
    if settings.phase == "pretrain":
        return -utility, None, utility
    privacy = privacy_term(nets, r, u, prior, settings.privacy_bound)
    return settings.lam * privacy - (1.0 - settings.lam) * utility, privacy, utility
