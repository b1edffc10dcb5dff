"""PR-GAN-MED: PR-GAN's generator conditioned on a private value drawn from MED(z | y), beyond the paper.

PR-GAN's Theorem 1 (section 4) states the optimal mechanism A*: for x in the region X(y, z), choose a
target region X(y, z') with probability MED(z'|y) (eq. 3), then emit a point of that region. Its output
is then independent of x's own z given y. PR-GAN approximates A* with one generator G(x) whose D_z
output is pulled toward the whole distribution MED(z|y) (eq. 8); a fresh attacker trained on G's output
can still read x's z from what G leaves of x. This variant takes A*'s first step literally:

* on the device, y^ = argmax D_y(x) (the defender's fixed D_y, exported beside G: y is not given to the
  device), z' ~ MED(z | y^) and noise ~ N(0, I) are drawn in numpy with the Privatizer's generator (OS
  entropy unless seeded; sensorveil.runtime.stages.prgan_med), and G(x, y^, z', noise) emits the sample;
* in training, G is conditioned exactly so (the same numpy draws, seeded) and minimises PR-GAN's eq. 11
  with eq. 8's second term aimed at the drawn z' instead of MED(z|y): L_Adv = l(D_y(G), y) + CE(D_z(G), z'),
  so the fixed D_y still reads y and the fixed D_z reads z' (not "away from z"); eq. 9's GAN term and
  eq. 10's hinge (the distortion constraint ||G - x|| <= c) are PR-GAN's, as is section 6.4's sweep of c.

Everything else (slices, fixed classifiers, margin sweep, evaluation) is PR-GAN's own code.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.runtime.stages.prgan_med import PRGANMEDEntry, conditioned
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import BundleParts, Graph
from sensorveil.sdk.mechanisms.prgan import (
    GENERATOR_FILE,
    Experiment,
    PerturbationMechanism,
    fit_variant,
    reload_experiment,
    train_generator,
)
from sensorveil.sdk.networks import PerturbationGenerator, make_generator
from sensorveil.sdk.rundir import RunRecord
from sensorveil.sdk.training import apply, model_shape, predict, sensor_step, snap_to_sensor

NOISE_DIM = 8          # noise ~ N(0, I) values G reads beside (y, z'): varied outputs within one (y, z')
MED_FILE = "prgan_med_med.npy"


class ConditionalGenerator(nn.Module):
    """G(x, y, z', noise) as one graph with one input: rows [x flattened, onehot(y), onehot(z'), noise]
    (what the runtime stage builds). The condition is appended to a vector's features or stacked on an
    image as constant channels; the output is PR-GAN's x + tanh(body), clipped to [0, 1], in x's shape."""

    def __init__(self, modality: str, shape: tuple, condition_dim: int):
        super().__init__()
        self.shape, self.size, self.vector = tuple(shape), int(np.prod(shape)), modality == "vector"
        self.body = make_generator(modality, self.shape, extra=condition_dim).body

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        x = packed[:, :self.size].reshape((-1,) + self.shape)
        condition = packed[:, self.size:]
        if self.vector:
            features = torch.cat([x, condition], dim=1)
        else:   # (N, k, 1, 1) * (N, 1, H, W): the condition as k constant channels (Mul, not Expand: TFLite maps it)
            features = torch.cat([x, condition[:, :, None, None] * torch.ones_like(x)], dim=1)
        return PerturbationGenerator.perturb(x, self.body(features))


def new_generator(modality: str, shape: tuple, med: np.ndarray, noise_dim: int) -> ConditionalGenerator:
    return ConditionalGenerator(modality, shape, med.shape[0] + med.shape[1] + noise_dim)


def med_privatize(G: nn.Module, D_y: nn.Module, med: np.ndarray, noise_dim: int, step: float, seed=None):
    """The mechanism in torch, model units in and out, with the device stage's own draws: y^ = argmax D_y(x),
    z' ~ MED(z|y^), noise, G; snapped to the sensor's grid. ``seed`` None: OS entropy."""
    rng = np.random.default_rng(seed)

    def privatize(x: torch.Tensor) -> torch.Tensor:
        packed, _ = conditioned(x.numpy(), predict(D_y, x), med, noise_dim, rng)
        return snap_to_sensor(apply(G, torch.from_numpy(packed)), step)
    return privatize


def fit_med(exp: Experiment, name: str, noise_dim: int = NOISE_DIM) -> tuple[nn.Module, dict, object]:
    """Section 6.4's sweep of eq. 10's margin c over conditional generators (PR-GAN's loop, eq. 7-11)."""
    D_y, med, shape = exp.fixed["D_y"], exp.med, model_shape(exp.dataset)
    draws = np.random.default_rng(exp.config.seed)     # training's draws of z' and noise, replayable

    def condition(x: torch.Tensor, y: torch.Tensor):
        # the device's inputs: y^ from the fixed D_y (not the true y), z' ~ MED(z|y^), noise; eq. 8's
        # second term, CE(D_z(G), target rows), is then aimed at onehot(z')
        packed, private = conditioned(x.numpy(), predict(D_y, x), med, noise_dim, draws)
        return torch.from_numpy(packed), F.one_hot(torch.from_numpy(private), med.shape[1]).float()

    def train(c: float, desc: str) -> nn.Module:
        return train_generator(exp, "prgan", c, desc, make=lambda: new_generator(
            exp.dataset.modality, shape, med, noise_dim), condition=condition)

    def release(G: nn.Module):
        return med_privatize(G, D_y, med, noise_dim, exp.step, seed=exp.config.seed)

    G, selection = fit_variant(exp, "prgan", train=train, release=release, name=name)
    return G, {**selection, "noise_dim": noise_dim}, release(G)


class PRGANMEDMechanism(PerturbationMechanism):
    """PR-GAN's experiment and evaluation; a conditional generator and a two-graph pipeline."""

    def fit(self, exp: Experiment, out: Path):
        G, selection, privatize = fit_med(exp, self.name)
        torch.save(G.state_dict(), Path(out) / GENERATOR_FILE)
        return privatize, selection

    def load(self, run_dir, run: RunRecord):
        """(the run's experiment, its conditional generator)."""
        exp = reload_experiment(run_dir, run)
        G = new_generator(run.modality, run.model_shape, exp.med, self.noise_dim(run))
        G.load_state_dict(torch.load(Path(run_dir) / GENERATOR_FILE, weights_only=True))
        return exp, G.eval()

    @staticmethod
    def noise_dim(run: RunRecord) -> int:
        return int((run.selection or {}).get("noise_dim", NOISE_DIM))

    def privatize(self, run_dir, run: RunRecord):
        exp, G = self.load(run_dir, run)
        return med_privatize(G, exp.fixed["D_y"], exp.med, self.noise_dim(run), sensor_step(run.output),
                             seed=run.seed)

    def graphs(self, run_dir, run: RunRecord) -> dict:
        exp, G = self.load(run_dir, run)
        D_y, med, noise_dim = exp.fixed["D_y"], exp.med, self.noise_dim(run)

        def generator_inputs(model_inputs: np.ndarray) -> np.ndarray:
            # what the stage feeds G for these inputs; a fixed seed: export validation, not the mechanism
            x = torch.from_numpy(model_inputs)
            return conditioned(model_inputs, predict(D_y, x), med, noise_dim, np.random.default_rng(0))[0]
        return {"classifier": Graph(D_y.eval()), "generator": Graph(G, inputs=generator_inputs)}

    def bundle(self, run_dir, run: RunRecord, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        entry, _ = super().bundle(run_dir, run, dataset, out_dir, include_samples)
        np.save(Path(out_dir) / MED_FILE, reload_experiment(run_dir, run).med, allow_pickle=False)
        entry["parameters"]["noise_dim"] = self.noise_dim(run)
        stage = PRGANMEDEntry("classifier", "generator", MED_FILE, self.noise_dim(run))
        return BundleParts(entry, [stage.to_manifest()])


register(PRGANMEDMechanism("prgan-med", "PR-GAN conditioned on z' ~ MED(z|y) (Theorem 1's A*, beyond the paper)"))
