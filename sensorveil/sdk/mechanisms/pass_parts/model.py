"""PASS's model: the embedding networks f, the learnable substitute embeddings g (SubstitutionModel,
eq. 2) and the export head (SubstitutionHead)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk.networks import DepthClassifier
from sensorveil.sdk.training import apply


# -- embedding networks f (Table 6: MLP for features, CNN for sensor windows and images) -------
def mlp_embedding(dim: int, out: int) -> nn.Module:
    """3-layer MLP (Table 6, AudioMNIST column) for feature vectors such as WiFi fingerprints."""
    return nn.Sequential(nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, out))


def window_embedding(channels: int, out: int) -> nn.Module:
    """6-layer 1-D CNN (Table 6, Motion Sense column) for (channels, time) sensor windows. The
    leading BatchNorm learns the per-channel standardisation of appendix E.1 inside the graph."""
    def block(cin, cout, pool):
        layers = [nn.Conv1d(cin, cout, 5, padding=2), nn.ReLU()]
        return layers + ([nn.MaxPool1d(2)] if pool else [])
    return nn.Sequential(nn.Flatten(1, 2), nn.BatchNorm1d(channels),
                         *block(channels, 32, False), *block(32, 32, True), *block(32, 64, False),
                         *block(64, 64, True), *block(64, 128, False), *block(128, 128, False),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(128, out))


def small_image_embedding(side: int, out: int) -> nn.Module:
    """Conv net for small images (8x8 digits): one stride-2 conv, then a 2-layer MLP head."""
    half = (side + 1) // 2
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(64 * half * half, 256), nn.ReLU(), nn.Linear(256, out))


def large_image_embedding(out: int) -> nn.Module:
    """Conv net for camera crops (grey, 0 a valid value): four stride-2 convs and a pooled 2-layer MLP
    head (a small stand-in for Table 6's pre-trained backbone followed by a 2-layer MLP)."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                         nn.Linear(64 * 16, 256), nn.ReLU(), nn.Linear(256, out))


def depth_embedding(out: int) -> nn.Module:
    """f for depth frames: the depth classifier's network (learnable depth levels, invalid pixels
    masked, convs beside the height profile) with ``out`` outputs. The plain conv stack above cannot
    resolve the absolute heights that tell people apart and what a head's front looks like, so P(X'|X)
    collapsed to one distribution for every input (PASS's utility gone, mNAG 0)."""
    return DepthClassifier(out)


def make_embedding(modality: str, shape: tuple, out: int) -> nn.Module:
    if modality == "vector":
        return mlp_embedding(shape[0], out)
    if modality == "timeseries":
        return window_embedding(shape[-2], out)
    if modality == "depth":
        return depth_embedding(out)
    if shape[-1] >= 64:
        return large_image_embedding(out)
    return small_image_embedding(shape[-1], out)


def unit_rows(features: torch.Tensor) -> torch.Tensor:
    """Rows scaled to norm 1, as x * rsqrt(sum x^2): MUL, SUM and RSQRT quantize to int8 and map
    onto the Edge TPU, where F.normalize's ABS, SQRT and DIV stay on the CPU in float."""
    return features * torch.rsqrt((features * features).sum(dim=1, keepdim=True) + 1e-12)


def cosine_logits(features: torch.Tensor, g_unit: torch.Tensor, tau: float) -> torch.Tensor:
    """cos(f(x), g(x')) / tau for every substitute x' (eq. 2's exponent); g_unit rows have norm 1."""
    return unit_rows(features) @ (g_unit / tau).T


class SubstitutionModel(nn.Module):
    """f and the learnable substitute embeddings g: log P(X'|X) of eq. 2 for training."""

    def __init__(self, embed: nn.Module, bank_size: int, dim: int, tau: float):
        super().__init__()
        self.embed = embed
        self.g = nn.Parameter(torch.randn(bank_size, dim))
        self.tau = tau

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(cosine_logits(self.embed(x), F.normalize(self.g, dim=1), self.tau), dim=1)


class SubstitutionHead(nn.Module):
    """What the bundle carries: x -> the logits cos(f(x), g(x'))/tau of eq. 2, f with the head folded
    in and normalized g as a constant. The softmax and the draw happen in numpy on the device
    (sensorveil.runtime.stages.substitution): at tau = 0.01 the probabilities span many orders of
    magnitude, which an int8 softmax output (steps of 1/256) would round to zero, while the logits
    quantize with steps of a fraction of a nat."""

    def __init__(self, model: SubstitutionModel):
        super().__init__()
        self.embed = model.embed
        self.register_buffer("g_unit", F.normalize(model.g.detach(), dim=1))
        self.tau = model.tau
        self.validation_scale = model.tau   # the export compares logits * tau = cosines (exporter.compared_units)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cosine_logits(self.embed(x), self.g_unit, self.tau)


def probabilities(head: nn.Module, x: torch.Tensor) -> np.ndarray:
    """P(X'|X) for every row of x (model units): the softmax of the export head's logits (eq. 2)."""
    return torch.softmax(apply(head, x).double(), dim=1).numpy()
