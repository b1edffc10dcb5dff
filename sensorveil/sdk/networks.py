"""Network architectures per modality: PR-GAN's generator G, discriminator D, and the
classifiers used as D_y / D_z and as probing attackers (paper Table 1, scaled to our inputs).

Every network takes model-unit input: images/depth as (N, 1, H, W) in [0, 1], vectors as (N, D).
"""
from __future__ import annotations

import torch
from torch import nn


class PerturbationGenerator(nn.Module):
    """x' = clip(x + tanh(body(x)), 0, 1): G outputs a perturbed sample in the input's own space.

    The residual form starts G near the identity (utility first), and the final clip keeps the
    output inside the sensor's valid range so the runtime never emits impossible readings.
    """

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.perturb(x, self.body(x))

    @staticmethod
    def perturb(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        y = x + torch.tanh(residual)
        # clamp(y, 0, 1) written as relu(y) - relu(y - 1): the same values, but it quantizes to int8
        # RELU/SUB, which the Edge TPU maps, where clamp becomes a float RELU_0_TO_1 it cannot run
        return torch.relu(y) - torch.relu(y - 1.0)


def vector_generator(dim: int, hidden: int = 1024, extra: int = 0) -> nn.Module:
    # PR-GAN's WiFi G: 520 -> 1024 -> 520 is 1.07M params and 2.1 MFLOPs (Table 3: 1.1M, 2.1M).
    # ``extra``: conditioning features appended to the input (PR-GAN-MED's y, z' and noise)
    return PerturbationGenerator(nn.Sequential(nn.Linear(dim + extra, hidden), nn.ReLU(), nn.Linear(hidden, dim)))


def small_image_generator(width: int = 32, extra: int = 0) -> nn.Module:
    # Full-resolution 3x3 convs: an 8x8 digit has no room for down-sampling.
    # ``extra``: conditioning channels stacked on the image (PR-GAN-MED's y, z' and noise)
    return PerturbationGenerator(nn.Sequential(
        nn.Conv2d(1 + extra, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, 1, 3, padding=1)))


class DepthGeneratorBody(nn.Module):
    """Encoder-decoder for 180x180 depth, sized for >= 595.8 FPS on a 2-core CPU (PR-GAN Table 4)
    and within Table 3's 96.4 MFLOPs / 420.3K params: two stride-2 convs bring 180x180 down to
    45x45 so the residual blocks work on 16x fewer pixels, then two transposed convs come back up.
    """

    def __init__(self, width: int = 16, blocks: int = 2, extra: int = 0):
        super().__init__()
        half = width // 2
        self.encode = nn.Sequential(
            nn.Conv2d(1 + extra, half, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(half, width, 3, stride=2, padding=1), nn.ReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(width, width, 3, padding=1)) for _ in range(blocks))
        self.decode = nn.Sequential(
            nn.ConvTranspose2d(width, half, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(half, 1, 4, stride=2, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encode(x)
        for block in self.blocks:
            h = torch.relu(h + block(h))
        return self.decode(h)


def depth_generator(width: int = 16, blocks: int = 2, extra: int = 0) -> nn.Module:
    return PerturbationGenerator(DepthGeneratorBody(width, blocks, extra))


def vector_classifier(dim: int, classes: int) -> nn.Module:
    # PR-GAN Table 1, WiFi column: FC(256) ReLU Dropout FC(128) ReLU Dropout FC(64) ReLU FC(K).
    return nn.Sequential(
        nn.Linear(dim, 256), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, classes))


def small_image_classifier(side: int, classes: int, width: int = 32) -> nn.Module:
    # PR-GAN Table 1, MNIST column (Conv(64,5,5) x2, FC(128)), padded to keep an 8x8 digit whole;
    # 32 channels instead of 64 keeps quickstart under 5 minutes on 2 cores at no accuracy cost here.
    return nn.Sequential(
        nn.Conv2d(1, width, 5, padding=2), nn.ReLU(),
        nn.Conv2d(width, width, 5, padding=2), nn.ReLU(), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(width * side * side, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, classes))


class DepthLevels(nn.Module):
    """Depth read as K levels, relu(slope * (level_k - x)): how far each pixel rises above each level.

    Who someone is shows in absolute heights (a head 2 cm higher, shoulders 3 cm lower), which a stack
    of 3x3 convs on [0, 1] depth barely resolves: on synthetic depth it tells 20 people apart far less
    well than trees on a depth histogram do (``python scripts/depth_raw_accuracy.py --trees`` prints the
    trees' figure). Initialised as evenly spaced levels over the model-unit
    range a person occupies (learnable afterwards), this is the binned-depth encoding depth CNNs use.
    """

    def __init__(self, levels: int = 16, low: float = 0.15, high: float = 0.7, slope: float = 40.0):
        super().__init__()
        self.conv = nn.Conv2d(1, levels, 1)
        with torch.no_grad():
            self.conv.weight.fill_(-slope)
            self.conv.bias.copy_(slope * torch.linspace(low, high, levels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # an invalid pixel (0: no return) is no depth at all, not the nearest one: masked out
        return torch.relu(self.conv(x)) * (x > 0).to(x.dtype)


class DepthHistogram(DepthLevels):
    """The share of the frame's pixels that are valid and nearer than each of K depths t_k, sigmoid(slope *
    (t_k - x)) averaged over the frame: the person's cumulative depth histogram (a head 2 cm higher, shoulders
    3 cm wider move it visibly at the steps they cross). Trees on such a histogram tell the synthetic frames'
    20 people apart at 99.6% (scripts/depth_raw_accuracy.py --trees). Steps every ~47 mm over the distances
    people occupy under a ceiling sensor (0.8 to 2.65 m), learnable afterwards."""

    def __init__(self, steps: int = 40, low: float = 0.18, high: float = 0.59, slope: float = 300.0):
        super().__init__(steps, low, high, slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(self.conv(x)) * (x > 0).to(x.dtype)).mean((2, 3))


class DepthClassifier(nn.Module):
    """A small VGG-like stack stands in for Table 1's "VGG16 base", which a 2-core CPU cannot train.

    The frame is read at half resolution, each 2x2 block by its farthest valid pixel (a max-pool: an
    invalid 0 never wins unless the whole block is lost, where an average would make a hole look like a
    nearer surface), as depth levels into four stride-2 convs (shape: shoulder width, head outline,
    where the nose points), beside a frame-wide profile: the levels' mean and maximum (how much of the
    person rises above each level, and how far), the cumulative depth histogram (:class:`DepthHistogram`)
    and the share of valid pixels at full resolution (dark hair loses part of the head), into an MLP
    head and, for the profile, straight into the logits as well. The conv features are averaged over the
    frame: where a shape lies moves with pose and the tracker's jitter, and 4x4 cells of it let the
    network memorise the training frames rather than learn the people. The classifier before this one
    (levels at full resolution, 4x4 cells, no histogram) read identity less well held out;
    ``python scripts/depth_raw_accuracy.py --curve`` prints this one's held-out accuracy epoch by epoch."""

    def __init__(self, classes: int, levels: int = 16, steps: int = 40):
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.levels = DepthLevels(levels)
        self.histogram = DepthHistogram(steps)
        self.convs = nn.Sequential(
            nn.Conv2d(levels, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())   # what shapes, not where: pose and jitter move them
        profile = 2 * levels + steps + 1
        # the profile standardized per feature: a head 2 cm higher moves it by a fraction of its spread,
        # which unscaled would vanish beside the conv features
        self.profile_scale = nn.BatchNorm1d(profile)
        self.head = nn.Sequential(nn.Linear(64 + profile, 128), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(128, classes))
        # and straight to the logits: people differ by a few per cent of the population's spread in a
        # few profile features, which a linear read learns in far fewer steps than the MLP behind dropout
        self.profile_logits = nn.Linear(profile, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.pool(x)
        h = self.levels(half)
        profile = self.standardized(torch.cat([h.mean((2, 3)), h.amax((2, 3)),   # how much of the frame, how high
                                               self.histogram(half), (x > 0).to(x.dtype).mean((2, 3))], dim=1))
        return self.head(torch.cat([self.convs(h), profile], dim=1)) + self.profile_logits(profile)

    def standardized(self, profile: torch.Tensor) -> torch.Tensor:
        bn = self.profile_scale
        if self.training and len(profile) == 1:   # a last batch of one has no spread: use the running one
            return nn.functional.batch_norm(profile, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                            False, 0.0, bn.eps)
        return bn(profile)


def depth_classifier(classes: int) -> nn.Module:
    return DepthClassifier(classes)


def large_image_classifier(classes: int) -> nn.Module:
    # Camera crops (grey, 0 a valid value): four stride-2 convs and a pooled MLP head, no depth levels.
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(64 * 16, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, classes))


def timeseries_classifier(channels: int, classes: int) -> nn.Module:
    # Sensor windows (N, 1, channels, time): a 1-D CNN; the leading BatchNorm standardises each
    # channel (MotionSense's z-scoring, appendix E.1 of PASS) inside the network.
    return nn.Sequential(
        nn.Flatten(1, 2), nn.BatchNorm1d(channels),
        nn.Conv1d(channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(64, 64, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, classes))


def make_generator(modality: str, model_shape: tuple, extra: int = 0) -> nn.Module:
    """PR-GAN's G for this input; ``extra`` conditioning features (vectors) or channels (images) beside
    the sample, for a generator whose body also reads a condition (PR-GAN-MED)."""
    if modality == "vector":
        return vector_generator(model_shape[0], extra=extra)
    if modality == "depth" or model_shape[-1] >= 64:
        return depth_generator(extra=extra)
    return small_image_generator(extra=extra)


def make_classifier(modality: str, model_shape: tuple, classes: int) -> nn.Module:
    """Used for D_y, D_z, the GAN discriminator D (classes=1) and the probing attackers."""
    if modality == "vector":
        return vector_classifier(model_shape[0], classes)
    if modality == "timeseries":
        return timeseries_classifier(model_shape[-2], classes)
    if modality == "depth":
        return depth_classifier(classes)
    if model_shape[-1] >= 64:
        return large_image_classifier(classes)
    return small_image_classifier(model_shape[-1], classes)
