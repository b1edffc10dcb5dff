"""Algorithm 1's DeviceUpdate (one SGD step of Psi, Omega, then Theta per mini-batch) and the local
attack probe of @app.evaluate."""
from __future__ import annotations

import torch
from torch import nn

from sensorveil.sdk.mechanisms.tappfl_parts.config import LocalSettings
from sensorveil.sdk.mechanisms.tappfl_parts.losses import (
    jsd_mutual_information,
    negatives,
    privacy_condition_loss,
    theta_objective,
    vclub_upper_bound,
)
from sensorveil.sdk.mechanisms.tappfl_parts.model import DeviceNetworks
from sensorveil.sdk.training import batches


# -- Algorithm 1, DeviceUpdate -------------------------------------------------------------------
def sgd_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def device_step(nets: DeviceNetworks, optimizers: dict, x, u, prior, settings: LocalSettings,
                generator: torch.Generator) -> dict:
    """One mini-batch of Algorithm 1 (lines 16-18): Psi and Omega, then Theta with the updated g, h.
    Psi's loss (eq. 3) and Omega's (the JSD estimate) see r detached and share no parameters, so one
    backward pass gives both the gradients Algorithm 1 takes one after the other. Pre-training
    leaves g alone (the utility term only)."""
    x_bar = negatives(x, generator)
    r = nets.f(x)
    critic_loss = -jsd_mutual_information(nets.h, x, x_bar, r.detach(), u)
    ce = privacy_condition_loss(nets.g(r.detach()), u) if settings.phase == "tappfl" else None
    sgd_step(optimizers["gh"], critic_loss if ce is None else critic_loss + ce)
    loss, privacy, utility = theta_objective(nets, r, x, x_bar, u, prior, settings)
    sgd_step(optimizers["f"], loss)
    figures = {"jsd": float(utility.detach())}
    if privacy is not None:
        figures["ce"] = float(ce.detach())
        figures["vclub" if settings.privacy_bound == "vclub" else "neg_ce"] = float(privacy.detach())
    return figures


def device_update(nets: DeviceNetworks, x: torch.Tensor, u: torch.Tensor, n_private: int,
                  settings: LocalSettings, generator: torch.Generator) -> dict:
    """E local epochs over the device's data; the figures are the last epoch's means (Figure 2's CE
    and JSD values, and the vCLUB estimate)."""
    prior = torch.bincount(u, minlength=n_private).float() / len(u)
    optimizers = {"f": torch.optim.SGD(nets.f.parameters(), lr=settings.lr),
                  "gh": torch.optim.SGD([*nets.g.parameters(), *nets.h.parameters()], lr=settings.lr)}
    for module in (nets.f, nets.g, nets.h):
        module.train()
    last = {}
    for epoch in range(settings.local_epochs):
        sums, steps = {}, 0
        for idx in batches(len(x), settings.batch_size, generator):
            if len(idx) < 2:   # x_bar needs a second sample in the batch
                continue
            for key, value in device_step(nets, optimizers, x[idx], u[idx], prior, settings, generator).items():
                sums[key] = sums.get(key, 0.0) + value
            steps += 1
        last = {key: value / max(steps, 1) for key, value in sums.items()}
    return last


def local_attack_probe(f: nn.Module, g: nn.Module, x, u, n_private: int, settings: LocalSettings,
                       generator: torch.Generator) -> dict:
    """@app.evaluate: the paper's own leakage measure on this device, f + g (section "Evaluation
    metrics"): g is fitted by eq. 3 to the global f's representations of the device's data for E
    epochs (a copy; the device's g is not changed), then scored on that same data (optimistic)."""
    with torch.no_grad():
        r = f.eval()(x)
    optimizer = torch.optim.SGD(g.parameters(), lr=settings.lr)
    g.train()
    for _ in range(settings.local_epochs):
        for idx in batches(len(r), settings.batch_size, generator):
            sgd_step(optimizer, privacy_condition_loss(g(r[idx]), u[idx]))
    with torch.no_grad():
        logits = g.eval()(r)
        prior = torch.bincount(u, minlength=n_private).float() / len(u)
        return {"attack_acc": float((logits.argmax(1) == u).float().mean()),
                "attack_ce": float(privacy_condition_loss(logits, u)),
                "vclub": float(vclub_upper_bound(logits, u, prior))}
