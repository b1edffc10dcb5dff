"""The three networks every device holds: f_Theta (the released representation), g_Psi (q_Psi(u|r))
and h_Omega (the utility critic)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# -- the three networks (Table 3, tabular column, as far as it is legible) ----------------------
def feature_extractor(input_dim: int, representation_dim: int) -> nn.Module:
    """f_Theta: model-unit sample -> r in [-1, 1]^d (tanh: Theorem 1's bounded representation space)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(input_dim, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                         nn.Linear(128, representation_dim), nn.Tanh())


def privacy_network(representation_dim: int, n_private: int) -> nn.Module:
    """g_Psi: r -> logits of q_Psi(u | r)."""
    return nn.Sequential(nn.Linear(representation_dim, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                         nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, n_private))


class UtilityCritic(nn.Module):
    """h_Omega(x, r, u) = s * cos(phi(x), psi(r, u)): a separable critic (the "encode and compare" critics
    of Hjelm et al., whose JSD estimator the paper uses). A critic on the concatenation [x, r, u] did not
    leave -2 log 2 in 1,200 SGD steps at the paper's lr 0.01 on digits; this one does within a few
    hundred. |h| <= s bounds the estimate's top at -2 sp(-s) (-0.013 for s = 5) instead of 0."""

    def __init__(self, input_dim: int, representation_dim: int, n_private: int, scale: float = 5.0):
        super().__init__()
        self.n_private, self.scale = n_private, scale
        self.phi = nn.Sequential(nn.Linear(input_dim, 128), nn.ReLU(), nn.Linear(128, 64))
        self.psi = nn.Sequential(nn.Linear(representation_dim + n_private, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x: torch.Tensor, r: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(u, self.n_private).to(r.dtype)
        a = F.normalize(self.phi(x.flatten(1)), dim=1)
        b = F.normalize(self.psi(torch.cat([r, onehot], dim=1)), dim=1)
        return self.scale * (a * b).sum(1)


@dataclass
class DeviceNetworks:
    f: nn.Module
    g: nn.Module
    h: nn.Module

    @classmethod
    def build(cls, model: dict, seed: int) -> "DeviceNetworks":
        torch.manual_seed(seed)
        d, k = model["representation_dim"], model["n_private"]
        return cls(f=feature_extractor(model["input_dim"], d), g=privacy_network(d, k),
                   h=UtilityCritic(model["input_dim"], d, k))
