"""Sanitizer's latent mechanism on the device (section 3.1 of the Sanitizer paper): the encoder's
latent z = [z_S, z_NS] comes in, z_S is transformed, z_NS passes unchanged, and the decoder (the next
pipeline stage) turns the result back into a sample. Randomness from the Privatizer's generator.

* suppression:    z~_S = 0 (the prior's mean, so the decoder still produces plausible samples);
* obfuscation:    z_S clipped to L2 norm C, plus iid Laplace(Delta / epsilon) noise per dimension;
* generalization: z~_S one of the k-means centroids of the training z_S, chosen uniformly;
* sampling:       z~_S drawn from the Gaussian mixture fitted to the training rows' z_S as released (draws of
                  q(z|x), or their means in a bundle that releases the mean).

numpy only (the mixture is sampled through each component's Cholesky factor), Python 3.6.
"""
import math

import numpy as np

from sensorveil.runtime.errors import BundleError, InputError
from sensorveil.runtime.manifest_fields import (
    MAX_SAMPLE_ELEMENTS,
    fail,
    need_integer,
    need_listed,
    need_number,
    need_object,
    need_text,
    optional,
    pipeline_of,
    subpath,
)
from sensorveil.runtime.stages.base import MODEL_UNITS, Stage

MECHANISMS = ("suppression", "obfuscation", "generalization", "sampling")
# Obfuscation is epsilon-DP with Laplace(Delta / epsilon), Delta = 2 C sqrt(k) (laplace_scale). A scale whose
# epsilon is above this protects nothing worth the name; 10 is far above the budgets the paper uses
# (section 3.1) and the sdk's default of 1.
MAX_EPSILON = 10.0
MAX_CLIP_NORM = 1e6     # latent norms are O(1); a clip far beyond them is no clip and loses float precision
# obfuscation's scalars, written once, in the stage, by obfuscation_parameters
NOISE_KEYS = ("clip_norm", "sensitivity", "laplace_scale", "epsilon")
ARRAY_FILE = "sanitizer_{}.npy"     # the bundle (and run directory) file of each of PARAMETER_ARRAYS


def sensitivity(clip_norm, sensitive_dim):
    """Delta, the L1 sensitivity of z_S clipped to L2 norm C: two such vectors differ by at most 2C in L2,
    hence by at most 2 C sqrt(k) in L1 (section 3.1 b)."""
    return 2 * clip_norm * math.sqrt(sensitive_dim)


def laplace_scale(clip_norm, sensitive_dim, epsilon):
    """b = Delta / epsilon: Laplace(b) noise per dimension makes obfuscation epsilon-DP (section 3.1 b)."""
    return sensitivity(clip_norm, sensitive_dim) / epsilon


def obfuscation_parameters(clip_norm, sensitive_dim, epsilon):
    """What obfuscation's stage carries and the sdk's run records: C, Delta, b and epsilon."""
    return {"clip_norm": clip_norm, "sensitivity": sensitivity(clip_norm, sensitive_dim),
            "laplace_scale": laplace_scale(clip_norm, sensitive_dim, epsilon), "epsilon": epsilon}


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


def validate_laplace(where, path, stage, sensitive_dim):
    """The noise must be there and large enough: clip norm C and scale b positive, and the epsilon they
    give, Delta / b with Delta = 2 C sqrt(k), at most MAX_EPSILON and at most the recorded epsilon."""
    clip_norm = need_number(where, path + ".clip_norm", stage.get("clip_norm"), positive=True)
    scale = need_number(where, path + ".laplace_scale", stage.get("laplace_scale"), positive=True)
    if clip_norm > MAX_CLIP_NORM:
        fail(where, path + ".clip_norm", clip_norm, "a clip norm from 0 to {:g} (latent norms are O(1))".format(
            MAX_CLIP_NORM))
    optional(stage, "epsilon", need_number, where, path + ".epsilon", stage.get("epsilon"), True)
    epsilon = sensitivity(clip_norm, sensitive_dim) / scale
    budget = min(MAX_EPSILON, float(stage.get("epsilon", MAX_EPSILON)))
    if not epsilon <= budget * (1 + 1e-9):
        fail(where, path + ".laplace_scale", scale, "at least 2 * clip_norm * sqrt(sensitive_dim) / epsilon = "
             "{:.6g} for epsilon {:g} (this scale gives epsilon {:.3g})".format(
                 laplace_scale(clip_norm, sensitive_dim, budget), budget, epsilon))
    if "sensitivity" in stage:     # a record of Delta, never used by the draw: it must still tell the truth
        agrees(where, path + ".sensitivity", stage["sensitivity"], sensitivity(clip_norm, sensitive_dim),
               "2 * clip_norm * sqrt(sensitive_dim)")


def agrees(where, path, recorded, value, what):
    """A recorded copy of a value the runtime computes or reads elsewhere: refused when it differs."""
    if isinstance(recorded, bool) or not isinstance(recorded, (int, float)) or \
            not math.isclose(recorded, value, rel_tol=1e-9, abs_tol=0.0):
        fail(where, path, recorded, "{} = {:.6g}".format(what, value))


def validate_recorded_noise(where, path, stage, manifest):
    """Bundles exported before the noise's scalars were written once also copied them into
    mechanism.parameters, where nothing read them; such a copy must agree with the stage's."""
    parameters = manifest["mechanism"].get("parameters")
    if not isinstance(parameters, dict):
        return
    for key in NOISE_KEYS:
        if key in parameters and key in stage:
            agrees(where, "mechanism.parameters." + key, parameters[key], float(stage[key]),
                   "{} of {}".format(key, path))


def check_parameters(root, mechanism, params, sensitive_dim):
    """Generalization's centroids and sampling's mixture replace z_S: finite, of z_S's width."""
    for name, value in params.items():
        if not isinstance(value, np.ndarray):
            continue
        if value.dtype.kind not in "iuf" or not np.isfinite(value).all():
            raise BundleError("{}: sanitizer array {} holds NaN, inf or non-numbers; expected finite "
                              "values".format(root, name))
    width = {"centroids": params.get("centroids"), "mixture_means": params.get("mixture_means")}
    for name, value in width.items():
        if value is not None and (value.ndim != 2 or value.shape[1] != sensitive_dim or not len(value)):
            raise BundleError("{}: sanitizer array {} has shape {}; expected (n, {}) (sensitive_dim)".format(
                root, name, value.shape, sensitive_dim))
    weights = params.get("mixture_weights")
    if weights is not None and ((weights < 0).any() or not weights.sum() > 0):
        raise BundleError("{}: sanitizer mixture_weights must be non-negative with a positive sum".format(root))


class SanitizerEntry(object):
    """What the sdk writes for the latent mechanism, read back by :class:`SanitizerStage`: which mechanism,
    z_S's width, the arrays it replaces z_S with (ARRAY_FILE, saved by the sdk) and, for obfuscation,
    its noise from C and epsilon (obfuscation_parameters)."""

    def __init__(self, mechanism, sensitive_dim, clip_norm=None, epsilon=None):
        self.mechanism, self.sensitive_dim = mechanism, sensitive_dim
        self.clip_norm, self.epsilon = clip_norm, epsilon

    def to_manifest(self):
        entry = {"kind": SanitizerStage.kind, "mechanism": self.mechanism, "sensitive_dim": self.sensitive_dim,
                 "arrays": {name: ARRAY_FILE.format(name) for name in PARAMETER_ARRAYS[self.mechanism]}}
        if self.mechanism == "obfuscation":
            entry.update(obfuscation_parameters(self.clip_norm, self.sensitive_dim, self.epsilon))
        return entry


class SanitizerStage(Stage):
    """``{"kind": "sanitizer", "mechanism", "sensitive_dim", "arrays": {name: file}, "clip_norm",
    "laplace_scale"}``: latent in, latent out (model units of the decoder's input)."""

    kind = "sanitizer"
    emits = MODEL_UNITS

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        mechanism = need_text(where, path + ".mechanism", stage.get("mechanism"), MECHANISMS)
        # z_S of no dimensions sanitizes nothing: the whole latent would pass unchanged
        sensitive_dim = need_integer(where, path + ".sensitive_dim", stage.get("sensitive_dim"), 1, MAX_SAMPLE_ELEMENTS)
        arrays = stage.get("arrays", {})
        need_object(where, path + ".arrays", arrays)
        for name, file_name in arrays.items():
            need_listed(where, subpath(path + ".arrays", name), file_name, manifest["files"])
        for key in ("clip_norm", "laplace_scale"):
            optional(stage, key, need_number, where, path + "." + key, stage.get(key))
        if mechanism == "obfuscation":
            validate_laplace(where, path, stage, sensitive_dim)
            validate_recorded_noise(where, path, stage, manifest)
        if pipeline_of(manifest)[-1] is stage:     # a sanitized latent is not a sample: the decoder must follow
            fail(where, path + ".kind", stage["kind"], "a sanitizer stage followed by the decoder's model stage")

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
        check_parameters(context.bundle.root, self.mechanism, self.params, self.sensitive_dim)
        if self.mechanism == "obfuscation":
            self.params.update(clip_norm=float(self.require("clip_norm")),
                               laplace_scale=float(self.require("laplace_scale")))

    def __call__(self, latent, rng):
        if latent.ndim != 2 or latent.shape[1] <= self.sensitive_dim:
            raise InputError("the encoder returned a latent of shape {}; expected (batch, more than {}): z_S "
                             "(sensitive_dim {}) and z_NS".format(latent.shape, self.sensitive_dim, self.sensitive_dim))
        return sanitize_latent(latent, self.sensitive_dim, self.mechanism, self.params, rng)
