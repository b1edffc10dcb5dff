"""Algorithm 1's DeviceUpdate (one SGD step of Psi, Omega, then Theta per mini-batch), and what
@app.evaluate measures: the paper's inference accuracy (the device's own g on held-out rows) and the
local attack probe."""
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


def paper_inference_accuracy(f: nn.Module, g: nn.Module, x_heldout, u_heldout) -> float:
    """The paper's attribute inference accuracy on this device (section "Evaluation metrics": "device's
    feature extractor + privacy network on the privacy task's test set"): the device's own g_Psi, as
    DeviceUpdate left it, on f's representation of the device's held-out rows. f is the global
    Theta^{t+1} every device holds after Algorithm 1 line 7 (the one the bundle exports)."""
    with torch.no_grad():
        return float((g.eval()(f.eval()(x_heldout)).argmax(1) == u_heldout).float().mean())


def local_attack_probe(f: nn.Module, g: nn.Module, data, settings: LocalSettings, generator: torch.Generator) -> dict:
    """A fresh attacker on this device: a copy of g refitted by eq. 3 to the global f's representations
    of the device's training rows for E epochs (the device's own g is not changed), scored on its
    held-out rows."""
    with torch.no_grad():
        r, r_heldout = f.eval()(data.x), f(data.x_heldout)
    optimizer = torch.optim.SGD(g.parameters(), lr=settings.lr)
    g.train()
    for _ in range(settings.local_epochs):
        for idx in batches(len(r), settings.batch_size, generator):
            sgd_step(optimizer, privacy_condition_loss(g(r[idx]), data.u[idx]))
    with torch.no_grad():
        logits, u = g.eval()(r_heldout), data.u_heldout
        prior = torch.bincount(data.u, minlength=data.n_private).float() / len(data.u)
        return {"attack_acc": float((logits.argmax(1) == u).float().mean()),
                "attack_ce": float(privacy_condition_loss(logits, u)),
                "vclub": float(vclub_upper_bound(logits, u, prior))}
