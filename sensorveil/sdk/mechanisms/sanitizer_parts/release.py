"""Sanitizer's release (section 3.1) in torch, as the bundle runs it, and its measures.

z is drawn from q_phi(z|x) (or taken as its mean with release="mean"), z_S is replaced by z~_S under one of
the four mechanisms, and [z~_S, z_NS] is decoded. The released label is y~_S = g_u(z~_S), the aligner of
eq. 2 reading the replaced z_S (section 3.1 d, which releases D~ = {X~, {Y~_S, Y_NS}}). The parameters a
mechanism fits (generalization's centroids, sampling's mixture) are fitted on the z_S the release hands it:
draws of q_phi(z|x) when it releases draws, means when it releases means.
"""
from __future__ import annotations

import numpy as np
import torch

from sensorveil.runtime.stages.posterior import sample_posterior
from sensorveil.runtime.stages.sanitizer import obfuscation_parameters, sanitize_latent
from sensorveil.sdk.evaluation import Task
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.training import accuracy, snap_to_sensor, train_classifier


def released_latent(encoder, x: torch.Tensor, release: str, rng) -> np.ndarray:
    """z as the release hands it to the mechanism: a draw of q_phi(z|x) ("sample") or its mean ("mean")."""
    with torch.no_grad():
        mean, log_var = encoder(x)
    if release == "mean":
        return mean.numpy()
    return sample_posterior(torch.cat([mean, log_var], 1).numpy(), mean.shape[1], rng)


def mechanism_parameters(z_s: np.ndarray, config) -> dict:
    """What each mechanism needs, fitted on ``z_s``: the training rows' z_S as released (see
    ``released_latent``; scikit-learn here, the device only reads the arrays)."""
    z_s = np.asarray(z_s, np.float64)
    if config.mechanism == "generalization":
        from sklearn.cluster import KMeans

        model = KMeans(n_clusters=config.clusters, n_init=10, random_state=config.seed).fit(z_s)
        return {"centroids": model.cluster_centers_.astype(np.float64)}
    if config.mechanism == "sampling":
        from sklearn.mixture import GaussianMixture

        model = GaussianMixture(n_components=config.components, covariance_type="full", random_state=config.seed)
        model.fit(z_s)
        return {
            "mixture_weights": model.weights_,
            "mixture_means": model.means_,
            "mixture_cholesky": np.linalg.cholesky(model.covariances_),
        }
    if config.mechanism == "obfuscation":     # Lap(Delta / epsilon) per dimension, as the device draws it
        return obfuscation_parameters(config.clip_norm, config.sensitive_dim, config.epsilon)
    return {}


def fit_parameters(encoder, x_train: torch.Tensor, config) -> dict:
    """The mechanism's parameters fitted on the training rows' z_S drawn as the release draws it."""
    rng = np.random.default_rng(config.seed)
    return mechanism_parameters(released_latent(encoder, x_train, config.release, rng)[:, :config.sensitive_dim],
                                config)


def make_release(encoder, decoder, aligner, sensitive_dim: int, mechanism: str, params: dict, step: float,
                 seed=None, release: str = "sample"):
    """x -> (x~, y~_S): the sanitized sample, and the aligner's label of its z~_S (None without an aligner)."""
    rng = np.random.default_rng(seed)

    def run(x: torch.Tensor):
        latent = released_latent(encoder, x, release, rng)
        sanitized = torch.from_numpy(sanitize_latent(latent, sensitive_dim, mechanism, params, rng))
        with torch.no_grad():
            sample = snap_to_sensor(decoder(sanitized), step)
            labels = None if aligner is None else aligner(sanitized[:, :sensitive_dim]).argmax(1).numpy()
        return sample, labels

    return run


def make_privatize(encoder, decoder, sensitive_dim: int, mechanism: str, params: dict, step: float, seed=None,
                   release: str = "sample"):
    """The mechanism as the bundle runs it: z ~ q_phi(z|x) (or its mean), z_S sanitized, decoded."""
    run = make_release(encoder, decoder, None, sensitive_dim, mechanism, params, step, seed, release)
    return lambda x: run(x)[0]


def apply_release(run, x: torch.Tensor, batch_size: int = 512):
    """``make_release``'s output over ``x`` in batches: (x~, y~_S)."""
    parts = [run(x[i:i + batch_size]) for i in range(0, len(x), batch_size)]
    labels = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
    return torch.cat([p[0] for p in parts]), labels


def cas_on(task: Task, released_train: torch.Tensor, train_labels: np.ndarray, test_labels: np.ndarray,
           classes: int, epochs: int, seed: int) -> float:
    """Classification Accuracy Score (section 4.3, E2/E3): a classifier trained on the released training
    rows with ``train_labels``, scored on the RAW test rows against ``test_labels``."""
    net = make_classifier(task.modality, task.model_shape, classes)
    torch.manual_seed(seed)
    train_classifier(net, released_train, train_labels, epochs=epochs, desc="CAS", seed=seed)
    return accuracy(net, task.x[task.test], test_labels)


def cas(task: Task, released_train: torch.Tensor, labels: np.ndarray, classes: int, epochs: int, seed: int) -> float:
    """CAS with the true labels of the training rows (the useful attribute's E2, which the release keeps)."""
    return cas_on(task, released_train, labels[task.attacker_train], labels[task.test], classes, epochs, seed)


def private_cas(task: Task, released_train: torch.Tensor, relabelled: np.ndarray, epochs: int, seed: int) -> float:
    """E3 as section 3.1 d releases the data: trained on (x~, y~_S), y~_S = g_u(z~_S) of the released training
    rows (not their true labels), scored on the raw test rows' true private labels."""
    return cas_on(task, released_train, relabelled, task.private[task.test], task.n_private, epochs, seed)


def normalized_hypervolume(points: list) -> float:
    """Area dominated by (leakage, utility) points in the unit square, privacy being 1 - leakage and
    the reference point (privacy 0, utility 0), as in Ishibuchi et al. 2018: 1 is a perfect mechanism."""
    front = sorted(((1 - leak, util) for leak, util in points), reverse=True)
    area, best_utility = 0.0, 0.0
    for privacy, utility in front:  # sweep from most private to least
        if utility > best_utility:
            area += privacy * (utility - best_utility)
            best_utility = utility
    return float(area)
