"""A mechanism that exists only for the tests of the mechanism interface: two graphs (an encoder
and a decoder) with a numpy stage between them, the shape of Sanitizer's pipeline, registered
from outside the sensorveil package the way a user's own mechanism would be."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from sensorveil.runtime.stages import MODEL_UNITS, Stage
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import Graph, Mechanism

LATENT = 6


class ShiftStage(Stage):
    """Adds a bundle array to the latent, plus uniform noise from the Privatizer's generator."""

    kind = "toy_shift"
    emits = MODEL_UNITS

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.shift = context.array(self.require("shift"))
        self.noise = float(self.require("noise"))

    def __call__(self, batch, rng):
        return (batch + self.shift + self.noise * rng.uniform(-1, 1, batch.shape)).astype(np.float32)


def modules(seed: int) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(seed)
    encoder = nn.Sequential(nn.Flatten(), nn.Linear(64, LATENT), nn.Tanh())
    decoder = nn.Sequential(nn.Linear(LATENT, 64), nn.Sigmoid(), nn.Unflatten(1, (1, 8, 8)))
    return encoder.eval(), decoder.eval()


class ToyMechanism(Mechanism):
    name = "toy"
    kind = "latent"
    summary = "test-only encoder -> numpy shift -> decoder"

    def train(self, request):
        encoder, decoder = modules(request.seed)
        torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, Path(request.out) / "toy.pt")
        return {**request.base, "kind": self.kind, "reference": {}, "metrics": {}}

    def graphs(self, run_dir, run):
        encoder, decoder = modules(0)
        state = torch.load(Path(run_dir) / "toy.pt", weights_only=True)
        encoder.load_state_dict(state["encoder"])
        decoder.load_state_dict(state["decoder"])
        return {"encoder": Graph(encoder), "decoder": Graph(decoder, input_from="encoder")}

    def bundle(self, run_dir, run, dataset, out_dir, include_samples=True):
        np.save(Path(out_dir) / "shift.npy", np.linspace(-0.5, 0.5, LATENT, dtype=np.float32), allow_pickle=False)
        return ({"name": self.name, "kind": self.kind, "useful": run["useful"], "private": run["private"]},
                [{"kind": "model", "graph": "encoder"}, {"kind": "toy_shift", "shift": "shift.npy", "noise": 0.0},
                 {"kind": "model", "graph": "decoder"}])


register(ToyMechanism())
