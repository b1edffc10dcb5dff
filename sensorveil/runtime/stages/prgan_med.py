"""PR-GAN-MED on the device: PR-GAN's generator conditioned on a private value drawn from the maximum
entropy distribution, so that what leaves the sensor is steered by z' ~ MED(z | y) and not by x's own z.

PR-GAN's Theorem 1 builds its optimal mechanism A* in two steps: pick a target region X(y, z') with
probability MED(z'|y) (eq. 3), then emit a sample of that region. PR-GAN itself trains G(x) toward the
whole distribution MED(z|y) (eq. 8); this variant takes A*'s first step literally, in numpy:

1. y^ = argmax of the bundle's useful classifier (PR-GAN's fixed D_y) on x: the device is not told y;
2. z' ~ MED(z | y^), one draw per sample, with the Privatizer's generator (OS entropy unless seeded);
3. noise ~ N(0, I) of ``noise_dim`` values, from the same generator;
4. the generator graph G([x, onehot(y^), onehot(z'), noise]) emits the sample (model units), trained so
   that the fixed D_z reads z' from it (sensorveil.sdk.mechanisms.prgan_med).

The sdk trains and evaluates with these same functions. Runs on the boards' Python 3.6 with numpy 1.19.
"""
import numpy as np

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.manifest_fields import MAX_SAMPLE_ELEMENTS, need_integer, need_listed
from sensorveil.runtime.stages.attriguard import draw
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage, validate_graph_name

KIND = "prgan-med"


def draw_private(med, useful, rng):
    """z' ~ MED(z | y) for each row's useful value: ``med`` (n_useful, n_private) rows of eq. 3."""
    return draw(med[useful], rng)


def generator_input(x, useful, private, noise, n_useful, n_private):
    """G's input, one flat float32 row per sample: [x flattened, onehot(y), onehot(z'), noise]."""
    return np.concatenate([np.asarray(x, np.float32).reshape(len(x), -1), np.eye(n_useful, dtype=np.float32)[useful],
                           np.eye(n_private, dtype=np.float32)[private], np.asarray(noise, np.float32)], axis=1)


def conditioned(x, useful, med, noise_dim, rng):
    """(G's input, the drawn z') for a batch ``x`` in model units and its useful values."""
    private = draw_private(med, useful, rng)
    noise = rng.standard_normal((len(x), noise_dim))
    return generator_input(x, useful, private, noise, med.shape[0], med.shape[1]), private


class PRGANMEDEntry(object):
    """What the sdk writes for the conditioned generator, read back by :class:`PRGANMEDStage`: the two
    graphs' names, the bundle file holding MED(z|y) and the generator's noise width."""

    def __init__(self, classifier, generator, med, noise_dim):
        self.classifier, self.generator, self.med, self.noise_dim = classifier, generator, med, int(noise_dim)

    def to_manifest(self):
        return {"kind": KIND, "classifier": self.classifier, "generator": self.generator, "med": self.med,
                "noise_dim": self.noise_dim}


class PRGANMEDStage(Stage):
    """``{"kind": "prgan-med", "classifier", "generator", "med", "noise_dim"}``: model units in, the
    useful classifier's argmax, the draws of z' and the noise, the generator graph; model units out."""

    kind = KIND
    emits = MODEL_UNITS

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        for key in ("classifier", "generator"):
            validate_graph_name(where, path + "." + key, stage.get(key), manifest)
        need_listed(where, path + ".med", stage.get("med"), manifest["files"])
        need_integer(where, path + ".noise_dim", stage.get("noise_dim"), 0, MAX_SAMPLE_ELEMENTS)

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        root = context.bundle.root
        self.med = context.array(self.require("med")).astype(np.float64)
        if self.med.ndim != 2 or not np.all(self.med >= 0) or not np.allclose(self.med.sum(axis=1), 1.0):
            raise BundleError("{}: {} holds {} {}; expected MED(z|y), a (n_useful, n_private) array of "
                              "non-negative rows that sum to 1".format(root, spec["med"], self.med.dtype,
                                                                       self.med.shape))
        self.noise_dim = int(self.require("noise_dim"))
        if self.noise_dim < 0:
            raise BundleError("{}: prgan-med noise_dim {}; expected 0 or more".format(root, self.noise_dim))
        self.classify = context.graph(self.require("classifier"))
        self.generate = context.graph(self.require("generator"))

    def __call__(self, batch, rng):
        scores = self.classify(batch)
        if scores.ndim != 2 or scores.shape[1] != self.med.shape[0]:
            raise BundleError("{}: the useful classifier returned shape {}; expected (batch, {}) scores".format(
                self.context.bundle.root, scores.shape, self.med.shape[0]))
        packed, _ = conditioned(batch, scores.argmax(axis=1), self.med, self.noise_dim, rng)
        return self.generate(packed).reshape(batch.shape)
