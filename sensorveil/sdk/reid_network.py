"""A small re-identification network in the manner of OSNet (Zhou et al., "Omni-Scale Feature Learning for
Person Re-Identification", ICCV 2019), trained from scratch here: the audit's strongest attacker family on
camera crops.

OSNet's building block has T streams of 1..T stacked "Lite 3x3" convolutions (a pointwise then a depthwise
3x3), so one block sees a person at receptive fields 3, 5, ..., 2T+1 pixels at once; a channel gate shared
by the streams weighs the scales per input (the unified aggregation gate) before they are summed, and a
residual carries the block's input past them. This is a reduced version for 128x64 grey crops and a few
hundred training people: a stride-2 stem, two omni-scale blocks with T=4, global average pooling, one
linear classifier. It learns who each training crop is (the private label) on the RAW crops and is then
applied to the released ones: if it still recognises people there, the release leaks.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LiteConv(nn.Module):
    """OSNet's Lite 3x3: a 1x1 convolution, then a depthwise 3x3, batch norm and ReLU."""

    def __init__(self, channels_in: int, channels_out: int):
        super().__init__()
        self.point = nn.Conv2d(channels_in, channels_out, 1, bias=False)
        self.depth = nn.Conv2d(channels_out, channels_out, 3, padding=1, groups=channels_out, bias=False)
        self.norm = nn.BatchNorm2d(channels_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.norm(self.depth(self.point(x))))


class ChannelGate(nn.Module):
    """The unified aggregation gate: one small MLP on each stream's pooled channels, shared by all streams."""

    def __init__(self, channels: int, reduction: int = 4):
        super().__init__()
        self.squeeze = nn.Linear(channels, max(channels // reduction, 4))
        self.excite = nn.Linear(max(channels // reduction, 4), channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.excite(F.relu(self.squeeze(x.mean(dim=(2, 3))))))
        return x * weights[:, :, None, None]


class OmniScaleBlock(nn.Module):
    """1x1 down to a quarter of the channels, ``streams`` streams of 1..streams Lite 3x3 convolutions gated
    and summed, 1x1 back up, plus the residual."""

    def __init__(self, channels_in: int, channels_out: int, streams: int = 4):
        super().__init__()
        middle = max(channels_out // 4, 8)
        self.reduce = nn.Sequential(nn.Conv2d(channels_in, middle, 1, bias=False), nn.BatchNorm2d(middle), nn.ReLU())
        self.streams = nn.ModuleList(
            nn.Sequential(*[LiteConv(middle, middle) for _ in range(depth + 1)]) for depth in range(streams))
        self.gate = ChannelGate(middle)
        self.expand = nn.Sequential(nn.Conv2d(middle, channels_out, 1, bias=False), nn.BatchNorm2d(channels_out))
        self.skip = nn.Identity() if channels_in == channels_out else nn.Sequential(
            nn.Conv2d(channels_in, channels_out, 1, bias=False), nn.BatchNorm2d(channels_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        reduced = self.reduce(x)
        mixed = sum(self.gate(stream(reduced)) for stream in self.streams)
        return F.relu(self.expand(mixed) + self.skip(x))


def omni_scale_reid(channels: int, classes: int, width: int = 32) -> nn.Module:
    """The re-id network for (channels, H, W) crops of at least 32 px a side."""
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.MaxPool2d(2),
        OmniScaleBlock(width, 2 * width), nn.MaxPool2d(2),
        OmniScaleBlock(2 * width, 3 * width),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3 * width, classes))
