"""The alpha-beta-VAE of the Sanitizer paper (section 3) and its training by eq. 5.

Eq. 5 minimises alpha1 L1 + alpha2 L2 + alpha3 L3 - alpha4 L4 over the encoder, decoder and aligner, with
the adversary h_v trained at the same time to minimise L4:
* L1 (eq. 1) the beta-VAE bound, used as a loss: reconstruction error (Bernoulli -log p(x|z), data in
  [0, 1]) + beta KL(q(z|x) || N(0, I)). Eq. 1 prints the ELBO, which is maximised, inside an argmin;
  its negative is what eq. 5 minimises;
* L2 (eq. 2) the aligner g_u predicting the sensitive attribute from z_S (cross-entropy);
* L3 (eq. 3) the distance correlation between z_S and z_NS (Szekely et al. 2007);
* L4 (eq. 4) the adversary h_v predicting the sensitive attribute from z_NS (cross-entropy).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk.evaluation import Task
from sensorveil.sdk.training import batches, progress_bar, set_seed


class Encoder(nn.Module):
    def __init__(self, dim: int, latent: int):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
        self.mean, self.log_var = nn.Linear(128, latent), nn.Linear(128, latent)

    def forward(self, x):
        h = self.body(x)
        return self.mean(h), self.log_var(h)


class MeanEncoder(nn.Module):
    """The encoder graph of a bundle that releases the posterior mean of q(z|x)."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, x):
        return self.encoder(x)[0]


class PosteriorEncoder(nn.Module):
    """The encoder graph of a bundle that samples q(z|x) (section 3.1): [mean, log_var] side by side, one
    output, so the device's posterior-sample stage draws z from it."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, x):
        return torch.cat(self.encoder(x), dim=1)


class Decoder(nn.Module):
    def __init__(self, latent: int, sample_shape: tuple):
        super().__init__()
        self.sample_shape = tuple(sample_shape)
        dim = int(np.prod(sample_shape))
        self.body = nn.Sequential(
            nn.Linear(latent, 128), nn.ReLU(), nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, dim)
        )

    def forward(self, z):
        return torch.sigmoid(self.body(z)).reshape((-1,) + self.sample_shape)


def head(inputs: int, classes: int) -> nn.Module:
    """The aligner g_u and the adversary h_v: a small MLP on part of the latent."""
    return nn.Sequential(nn.Linear(inputs, 64), nn.ReLU(), nn.Linear(64, classes))


def distance_correlation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dCor(a, b) of a batch by the bias-corrected estimator (Szekely and Rizzo 2014, U-centred distance
    matrices): dCor^2 = dCov_u(a, b) / sqrt(dCov_u(a, a) dCov_u(b, b)), clamped at 0. The plain
    (V-statistic) estimator of 2007 is biased far above 0 for independent variables at L3's batch sizes,
    so L3 (eq. 3) gave almost no signal; tests/integration/test_sanitizer.py checks this one stays near 0
    there."""
    n = a.shape[0]
    if n < 4:
        return a.new_zeros(())

    def u_centred(x):
        d = torch.cdist(x, x)
        rows, total = d.sum(1, keepdim=True), d.sum()
        centred = d - rows / (n - 2) - rows.T / (n - 2) + total / ((n - 1) * (n - 2))
        return centred * (1 - torch.eye(n, dtype=x.dtype))

    A, B = u_centred(a), u_centred(b)
    dcov = lambda P, Q: (P * Q).sum() / (n * (n - 3))  # noqa: E731
    dcor2 = dcov(A, B) / (dcov(A, A) * dcov(B, B)).clamp_min(1e-24).sqrt()
    return (dcor2.clamp_min(0) + 1e-12).sqrt()


def vae_loss(x, recon, mean, log_var, beta):
    """-L1 of eq. 1 per sample: Bernoulli reconstruction error + beta KL(q(z|x) || N(0, I))."""
    reconstruction = F.binary_cross_entropy(recon.flatten(1), x.flatten(1).clamp(0, 1), reduction="none").sum(1)
    kl = -0.5 * (1 + log_var - mean.pow(2) - log_var.exp()).sum(1)
    return (reconstruction + beta * kl).mean()


def step_losses(nets: dict, x, s, config):
    """One batch: h_v's step on L4, then (-L1, L2, L3, L4) of eq. 1-4 for eq. 5's step."""
    k = config.sensitive_dim
    mean, log_var = nets["encoder"](x)
    z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()  # z ~ q_phi(z|x)
    z_s, z_ns = z[:, :k], z[:, k:]
    nets["adversary_opt"].zero_grad()
    F.cross_entropy(nets["adversary"](z_ns.detach()), s).backward()  # h_v minimises L4
    nets["adversary_opt"].step()
    return (vae_loss(x, nets["decoder"](z), mean, log_var, config.beta),  # -L1, eq. 1
            F.cross_entropy(nets["aligner"](z_s), s),  # L2, eq. 2
            distance_correlation(z_s, z_ns),  # L3, eq. 3
            F.cross_entropy(nets["adversary"](z_ns), s))  # L4, eq. 4


def build(task: Task, config) -> dict:
    """The encoder, decoder, aligner g_u and adversary h_v, with their two optimisers."""
    k, m = config.sensitive_dim, config.latent_dim
    nets = {"encoder": Encoder(int(np.prod(task.model_shape)), m), "decoder": Decoder(m, task.model_shape),
            "aligner": head(k, task.n_private), "adversary": head(m - k, task.n_private)}
    nets["main_opt"] = torch.optim.Adam([p for name in ("encoder", "decoder", "aligner")
                                         for p in nets[name].parameters()], lr=config.lr)
    nets["adversary_opt"] = torch.optim.Adam(nets["adversary"].parameters(), lr=config.lr)
    return nets


def fit(task: Task, rows: np.ndarray, config, epochs: int):
    """Eq. 5 on ``rows`` only: the encoder, decoder and aligner against the adversary, simultaneously (one
    step each per batch). Returns (encoder, decoder, aligner, history)."""
    set_seed(config.seed)
    nets = build(task, config)
    x_all, s_all = task.x[rows], torch.as_tensor(task.private[rows])
    weights = (config.alpha1, config.alpha2, config.alpha3, -config.alpha4)     # eq. 5
    generator, history = torch.Generator().manual_seed(config.seed), []
    for _ in progress_bar(range(epochs), "Sanitizer alpha-beta-VAE", config.progress):
        sums = np.zeros(4)
        for idx in batches(len(rows), config.batch_size, generator):
            losses = step_losses(nets, x_all[idx], s_all[idx], config)
            total = sum(w * loss for w, loss in zip(weights, losses))
            nets["main_opt"].zero_grad()
            total.backward()
            nets["main_opt"].step()
            sums += [float(v.detach()) for v in losses]
        means = sums / max(1, math.ceil(len(rows) / config.batch_size))
        history.append(dict(zip(("neg_L1", "L2", "L3", "L4"), means.round(4))))
    return nets["encoder"].eval(), nets["decoder"].eval(), nets["aligner"].eval(), history
