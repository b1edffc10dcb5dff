"""Sanitizer's latent mechanism on the device (section 3.1 of the Sanitizer paper): the encoder's
latent z = [z_S, z_NS] comes in, z_S is transformed, z_NS passes unchanged, and the decoder (the next
pipeline stage) turns the result back into a sample. Randomness from the Privatizer's generator.

* suppression:    z~_S = 0 (the prior's mean, so the decoder still produces plausible samples);
* obfuscation:    z_S clipped to L2 norm C, plus iid Laplace(Delta / epsilon) noise per dimension;
* generalization: z~_S one of the k-means centroids of the training z_S, chosen uniformly;
* sampling:       z~_S drawn from the Gaussian mixture fitted to the training z_S.

numpy only (the mixture is sampled through each component's Cholesky factor), Python 3.6.
"""
import numpy as np

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage

MECHANISMS = ("suppression", "obfuscation", "generalization", "sampling")


def clip_rows(z, norm):
    """Scale each row to L2 norm at most ``norm``: the clipping that bounds obfuscation's sensitivity."""
    lengths = np.linalg.norm(z, axis=1, keepdims=True)
    return z * np.minimum(1.0, norm / np.maximum(lengths, 1e-12))


def sanitize_sensitive(z_s, mechanism, params, rng):
    """z~_S for a batch of z_S (n, k) under one of the four mechanisms of section 3.1."""
    n, k = z_s.shape
    if mechanism == "suppression":
        return np.zeros_like(z_s)
    if mechanism == "obfuscation":
        return clip_rows(z_s, float(params["clip_norm"])) + rng.laplace(0.0, float(params["laplace_scale"]), (n, k))
    if mechanism == "generalization":
        centroids = params["centroids"]
        return centroids[rng.integers(len(centroids), size=n)]
    if mechanism == "sampling":
        weights, means, chol = params["mixture_weights"], params["mixture_means"], params["mixture_cholesky"]
        component = np.minimum(np.searchsorted(np.cumsum(weights), rng.random(n) * weights.sum()), len(weights) - 1)
        noise = rng.standard_normal((n, k))
        return means[component] + np.einsum("nij,nj->ni", chol[component], noise)
    raise ValueError("unknown Sanitizer mechanism {!r}; expected one of {}".format(mechanism, MECHANISMS))


def sanitize_latent(z, sensitive_dim, mechanism, params, rng):
    """The latent with its first ``sensitive_dim`` components (z_S) sanitized, the rest (z_NS) kept."""
    out = np.array(z, dtype=np.float32)
    out[:, :sensitive_dim] = sanitize_sensitive(out[:, :sensitive_dim].astype(np.float64), mechanism, params, rng)
    return out


PARAMETER_ARRAYS = {"obfuscation": (), "generalization": ("centroids",),
                    "sampling": ("mixture_weights", "mixture_means", "mixture_cholesky"), "suppression": ()}


class SanitizerStage(Stage):
    """``{"kind": "sanitizer", "mechanism", "sensitive_dim", "arrays": {name: file}, "clip_norm",
    "laplace_scale"}``: latent in, latent out (model units of the decoder's input)."""

    kind = "sanitizer"
    emits = MODEL_UNITS

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        self.mechanism = str(self.require("mechanism"))
        if self.mechanism not in MECHANISMS:
            raise BundleError("{}: sanitizer mechanism {!r}; expected one of {}".format(
                context.bundle.root, self.mechanism, MECHANISMS))
        self.sensitive_dim = int(self.require("sensitive_dim"))
        files = spec.get("arrays", {})
        self.params = {name: context.array(files[name]) if name in files else None
                       for name in PARAMETER_ARRAYS[self.mechanism]}
        missing = [name for name, value in self.params.items() if value is None]
        if missing:
            raise BundleError("{}: sanitizer mechanism {} needs arrays {}".format(
                context.bundle.root, self.mechanism, missing))
        if self.mechanism == "obfuscation":
            self.params.update(clip_norm=float(self.require("clip_norm")),
                               laplace_scale=float(self.require("laplace_scale")))

    def __call__(self, latent, rng):
        return sanitize_latent(latent, self.sensitive_dim, self.mechanism, self.params, rng)
