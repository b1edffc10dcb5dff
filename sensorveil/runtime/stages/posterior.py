"""Sanitizer's release as section 3.1 writes it: z ~ q_phi(z | x), drawn on the device.

The encoder graph returns the posterior's mean and log-variance side by side, (batch, 2m); this stage
draws z = mean + exp(log_var / 2) * eps, eps ~ N(0, I), with the Privatizer's generator (OS entropy
unless the caller passed a seed), and hands z to the sanitizer stage. Bundles exported before this
stage existed release the posterior mean and have no such stage; they load and run as they did.

numpy only, Python 3.6.
"""
import numpy as np

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.manifest_fields import MAX_SAMPLE_ELEMENTS, fail, need_integer, pipeline_of
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage

KIND = "posterior-sample"
# log-variances beyond these would overflow exp() or pretend to a certainty float32 cannot hold; a trained
# encoder's sit around -5..1
LOG_VAR_RANGE = (-30.0, 10.0)


def sample_posterior(posterior, latent_dim, rng):
    """z ~ N(mean, diag(exp(log_var))) per row of ``posterior`` = [mean, log_var] (batch, 2 latent_dim)."""
    mean = posterior[:, :latent_dim].astype(np.float64)
    log_var = np.clip(posterior[:, latent_dim:].astype(np.float64), *LOG_VAR_RANGE)
    return (mean + np.exp(0.5 * log_var) * rng.standard_normal(mean.shape)).astype(np.float32)


class PosteriorSampleEntry(object):
    """What the sdk writes for the draw, read back by :class:`PosteriorSampleStage`."""

    def __init__(self, latent_dim):
        self.latent_dim = int(latent_dim)

    def to_manifest(self):
        return {"kind": KIND, "latent_dim": self.latent_dim}


class PosteriorSampleStage(Stage):
    """``{"kind": "posterior-sample", "latent_dim": m}``: [mean, log_var] (batch, 2m) in, z (batch, m) out."""

    kind = KIND
    emits = MODEL_UNITS

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        need_integer(where, path + ".latent_dim", stage.get("latent_dim"), 1, MAX_SAMPLE_ELEMENTS)
        if pipeline_of(manifest)[-1] is stage:     # a latent is not a sample: the decoder must follow
            fail(where, path + ".kind", stage["kind"], "a posterior-sample stage followed by the stages "
                 "that sanitize and decode the latent")

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.latent_dim = int(self.require("latent_dim"))

    def __call__(self, posterior, rng):
        if posterior.ndim != 2 or posterior.shape[1] != 2 * self.latent_dim or not np.isfinite(posterior).all():
            raise InputError("the encoder returned {} {}; expected finite (batch, {}): the posterior's mean and "
                             "log-variance".format(posterior.dtype, posterior.shape, 2 * self.latent_dim))
        return sample_posterior(posterior, self.latent_dim, rng)
