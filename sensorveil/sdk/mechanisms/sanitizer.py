"""Sanitizer: an alpha-beta-VAE whose latent is split into a sensitive part z_S and a non-sensitive part
z_NS, and a mechanism that replaces z_S before decoding (section 3 of the Sanitizer paper).

Training (eq. 5) minimises alpha1 L1 + alpha2 L2 + alpha3 L3 - alpha4 L4 over the encoder, decoder and
aligner, with the adversary h_v trained at the same time to minimise L4:
* L1 (eq. 1) the beta-VAE bound, used as a loss: reconstruction error (Bernoulli -log p(x|z), data in
  [0, 1]) + beta KL(q(z|x) || N(0, I)). Eq. 1 prints the ELBO, which is maximised, inside an argmin;
  its negative is what eq. 5 minimises;
* L2 (eq. 2) the aligner g_u predicting the sensitive attribute from z_S (cross-entropy);
* L3 (eq. 3) the distance correlation between z_S and z_NS (Szekely et al. 2007);
* L4 (eq. 4) the adversary h_v predicting the sensitive attribute from z_NS (cross-entropy).
The mechanisms (section 3.1) run in numpy on the device (sensorveil.runtime.stages.sanitizer); the
bundle carries the encoder (posterior mean) and the decoder as two graphs.

The device encodes with the posterior mean, not a sample: z_S is replaced anyway, and sampling z_NS
would only add reconstruction noise, not privacy, since L3 and L4 already strip z_NS of the attribute.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.runtime.stages.model import ModelEntry
from sensorveil.runtime.stages.posterior import PosteriorSampleEntry, sample_posterior
from sensorveil.runtime.stages.sanitizer import (
    ARRAY_FILE,
    MECHANISMS,
    PARAMETER_ARRAYS,
    SanitizerEntry,
    obfuscation_parameters,
    sanitize_latent,
)
from sensorveil.sdk.evaluation import Task, apply_privatize, baselines, evaluate
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import BundleParts, Graph, Mechanism, TrainRequest, protocol_task
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.training import (
    accuracy,
    batches,
    progress_bar,
    sensor_step,
    set_seed,
    snap_to_sensor,
    train_classifier,
)

WEIGHTS_FILE = "sanitizer.pt"
RELEASES = ("sample", "mean")     # what the encoder hands the mechanism: a draw of q_phi(z|x), or its mean
DEFAULT_EPOCHS = {"digits": 80, "ujiindoorloc": 15}


@dataclass
class SanitizerConfig:
    latent_dim: int = 16             # m
    sensitive_dim: int = 4           # k: z_S is the first k components
    beta: float = 1.0                # eq. 1's KL weight
    alpha1: float = 1.0              # eq. 5's weights
    alpha2: float = 1.0
    alpha3: float = 1.0
    alpha4: float = 1.0
    mechanism: str = "sampling"      # suppression, obfuscation, generalization or sampling (section 3.1)
    release: str = "sample"          # z ~ q_phi(z|x) as section 3.1 releases it, or "mean" (the posterior mean)
    epsilon: float = 1.0             # obfuscation's privacy budget
    clip_norm: float = 2.0           # obfuscation's L2 clip of z_S, which bounds its sensitivity
    clusters: int = 8                # generalization's k-means clusters
    components: int = 8              # sampling's Gaussian mixture components
    epochs: int | None = None        # None: DEFAULT_EPOCHS for the dataset (else 40)
    batch_size: int = 128
    lr: float = 1e-3
    seed: int = 0
    progress: bool = True


class Encoder(nn.Module):
    def __init__(self, dim: int, latent: int):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
        self.mean, self.log_var = nn.Linear(128, latent), nn.Linear(128, latent)

    def forward(self, x):
        h = self.body(x)
        return self.mean(h), self.log_var(h)


class MeanEncoder(nn.Module):
    """The encoder graph of a bundle that releases the posterior mean of q(z|x)."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, x):
        return self.encoder(x)[0]


class PosteriorEncoder(nn.Module):
    """The encoder graph of a bundle that samples q(z|x) (section 3.1): [mean, log_var] side by side, one
    output, so the device's posterior-sample stage draws z from it."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, x):
        return torch.cat(self.encoder(x), dim=1)


class Decoder(nn.Module):
    def __init__(self, latent: int, sample_shape: tuple):
        super().__init__()
        self.sample_shape = tuple(sample_shape)
        dim = int(np.prod(sample_shape))
        self.body = nn.Sequential(
            nn.Linear(latent, 128), nn.ReLU(), nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, dim)
        )

    def forward(self, z):
        return torch.sigmoid(self.body(z)).reshape((-1,) + self.sample_shape)


def head(inputs: int, classes: int) -> nn.Module:
    """The aligner g_u and the adversary h_v: a small MLP on part of the latent."""
    return nn.Sequential(nn.Linear(inputs, 64), nn.ReLU(), nn.Linear(64, classes))


def distance_correlation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dCor(a, b) of a batch by the bias-corrected estimator (Szekely and Rizzo 2014, U-centred distance
    matrices): dCor^2 = dCov_u(a, b) / sqrt(dCov_u(a, a) dCov_u(b, b)), clamped at 0. The plain
    (V-statistic) estimator of 2007 is biased far above 0 for independent variables at L3's batch sizes,
    so L3 (eq. 3) gave almost no signal; tests/integration/test_sanitizer.py checks this one stays near 0 there."""
    n = a.shape[0]
    if n < 4:
        return a.new_zeros(())

    def u_centred(x):
        d = torch.cdist(x, x)
        rows, total = d.sum(1, keepdim=True), d.sum()
        centred = d - rows / (n - 2) - rows.T / (n - 2) + total / ((n - 1) * (n - 2))
        return centred * (1 - torch.eye(n, dtype=x.dtype))

    A, B = u_centred(a), u_centred(b)
    dcov = lambda P, Q: (P * Q).sum() / (n * (n - 3))  # noqa: E731
    dcor2 = dcov(A, B) / (dcov(A, A) * dcov(B, B)).clamp_min(1e-24).sqrt()
    return (dcor2.clamp_min(0) + 1e-12).sqrt()


def vae_loss(x, recon, mean, log_var, beta):
    """-L1 of eq. 1 per sample: Bernoulli reconstruction error + beta KL(q(z|x) || N(0, I))."""
    reconstruction = F.binary_cross_entropy(recon.flatten(1), x.flatten(1).clamp(0, 1), reduction="none").sum(1)
    kl = -0.5 * (1 + log_var - mean.pow(2) - log_var.exp()).sum(1)
    return (reconstruction + beta * kl).mean()


def fit(task: Task, rows: np.ndarray, config: SanitizerConfig, epochs: int):
    """Eq. 5: the encoder, decoder and aligner against the adversary, simultaneously (one step each
    per batch). Returns (encoder, decoder, history)."""
    set_seed(config.seed)
    k, m = config.sensitive_dim, config.latent_dim
    encoder, decoder = Encoder(int(np.prod(task.model_shape)), m), Decoder(m, task.model_shape)
    aligner, adversary = head(k, task.n_private), head(m - k, task.n_private)
    main = torch.optim.Adam([*encoder.parameters(), *decoder.parameters(), *aligner.parameters()], lr=config.lr)
    adversary_opt = torch.optim.Adam(adversary.parameters(), lr=config.lr)
    x_all, s_all = task.x[rows], torch.as_tensor(task.private[rows])
    generator, history = torch.Generator().manual_seed(config.seed), []
    for epoch in progress_bar(range(epochs), "Sanitizer alpha-beta-VAE", config.progress):
        sums = np.zeros(4)
        for idx in batches(len(rows), config.batch_size, generator):
            x, s = x_all[idx], s_all[idx]
            mean, log_var = encoder(x)
            z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()  # z ~ q_phi(z|x)
            z_s, z_ns = z[:, :k], z[:, k:]
            adversary_opt.zero_grad()
            F.cross_entropy(adversary(z_ns.detach()), s).backward()  # h_v minimises L4
            adversary_opt.step()
            losses = (
                vae_loss(x, decoder(z), mean, log_var, config.beta),  # -L1, eq. 1
                F.cross_entropy(aligner(z_s), s),  # L2, eq. 2
                distance_correlation(z_s, z_ns),  # L3, eq. 3
                F.cross_entropy(adversary(z_ns), s),
            )  # L4, eq. 4
            total = (
                config.alpha1 * losses[0]
                + config.alpha2 * losses[1]
                + config.alpha3 * losses[2]
                - config.alpha4 * losses[3]
            )  # eq. 5
            main.zero_grad()
            total.backward()
            main.step()
            sums += [float(v.detach()) for v in losses]
        means = sums / max(1, math.ceil(len(rows) / config.batch_size))
        history.append(dict(zip(("neg_L1", "L2", "L3", "L4"), means.round(4))))
    return encoder.eval(), decoder.eval(), history


def mechanism_parameters(z_s: np.ndarray, config: SanitizerConfig) -> dict:
    """What each mechanism needs, fitted on the training split's z_S (scikit-learn here; the device
    only reads the arrays)."""
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


def make_privatize(encoder, decoder, sensitive_dim: int, mechanism: str, params: dict, step: float, seed=None,
                   release: str = "sample"):
    """The mechanism as the bundle runs it: z ~ q_phi(z|x) (or its mean), z_S sanitized, decoded."""
    rng = np.random.default_rng(seed)

    def privatize(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            mean, log_var = encoder(x)
            latent = (sample_posterior(torch.cat([mean, log_var], 1).numpy(), mean.shape[1], rng)
                      if release == "sample" else mean.numpy())
            sanitized = sanitize_latent(latent, sensitive_dim, mechanism, params, rng)
            return snap_to_sensor(decoder(torch.from_numpy(sanitized)), step)

    return privatize


def cas(task: Task, released_train: torch.Tensor, labels: np.ndarray, classes: int, epochs: int, seed: int) -> float:
    """Classification Accuracy Score (section 4.3, E2/E3): trained on sanitized data, tested on raw data."""
    net = make_classifier(task.modality, task.model_shape, classes)
    torch.manual_seed(seed)
    train_classifier(net, released_train, labels[task.attacker_train], epochs=epochs, desc="CAS", seed=seed)
    return accuracy(net, task.x[task.test], labels[task.test])


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


class SanitizerMechanism(Mechanism):
    name = "sanitizer"
    kind = "latent"
    summary = "Sanitizer alpha-beta-VAE with a split latent (eq. 1-5) and a mechanism on z_S (section 3.1)"
    config_class = SanitizerConfig

    def make_config(self, request: TrainRequest) -> SanitizerConfig:
        config = super().make_config(request)
        config.epochs = request.epochs or config.epochs
        if config.release not in RELEASES:
            raise ValueError(f"sanitizer: release {config.release!r}; expected one of {RELEASES}")
        if config.mechanism not in MECHANISMS or not 0 < config.sensitive_dim < config.latent_dim:
            raise ValueError(
                f"sanitizer: mechanism must be one of {MECHANISMS} and 0 < sensitive_dim < latent_dim; "
                f"got {config.mechanism!r}, {config.sensitive_dim}/{config.latent_dim}"
            )
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = self.only_one(request.useful, "useful"), self.only_one(request.private, "private")
        config = self.make_config(request)
        task = protocol_task(request.data, useful, private, config.seed)
        epochs = config.epochs or DEFAULT_EPOCHS.get(request.data.name, 40)
        encoder, decoder, history = fit(task, task.attacker_train, config, epochs)
        with torch.no_grad():
            z_s = encoder(task.x[task.attacker_train])[0][:, : config.sensitive_dim].numpy().astype(np.float64)
        params = mechanism_parameters(z_s, config)
        torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, Path(request.out) / WEIGHTS_FILE)
        self.save_params(Path(request.out), params)
        step = sensor_step(request.base["output"])
        privatize = make_privatize(encoder, decoder, config.sensitive_dim, config.mechanism, params, step, config.seed,
                                   config.release)
        metrics = evaluate(task, privatize, None, attacker_epochs=request.attacker_epochs, seed=config.seed)
        released = apply_privatize(privatize, task.x[task.attacker_train])
        metrics.update(
            cas_useful=cas(task, released, task.useful, task.n_useful, request.attacker_epochs, config.seed),
            cas_private=cas(task, released, task.private, task.n_private, request.attacker_epochs, config.seed + 1),
        )
        metrics["hypervolume"] = normalized_hypervolume(
            [(metrics["probing_acc_private"], metrics["probing_acc_useful"])]
        )
        return {
            **request.base,
            "useful": useful,
            "private": private,
            "seed": config.seed,
            "kind": self.kind,
            "config": {**asdict(config), "epochs": epochs},
            "reference": baselines(task),
            "mechanism_parameters": {key: value for key, value in params.items() if np.ndim(value) == 0},
            "training": {"history": history},
            "metrics": metrics,
        }

    # -- persistence ------------------------------------------------------------------------------
    @staticmethod
    def save_params(out: Path, params: dict) -> None:
        for name, value in params.items():
            if np.ndim(value) > 0:
                np.save(out / ARRAY_FILE.format(name), np.asarray(value, np.float64), allow_pickle=False)

    def load(self, run_dir, run: dict):
        config = self.config_of(run)
        shape = tuple(run["model_shape"])
        encoder, decoder = Encoder(int(np.prod(shape)), config.latent_dim), Decoder(config.latent_dim, shape)
        state = torch.load(Path(run_dir) / WEIGHTS_FILE, weights_only=True)
        encoder.load_state_dict(state["encoder"])
        decoder.load_state_dict(state["decoder"])
        params = dict(run.get("mechanism_parameters", {}))
        params.update(
            {
                name: np.load(Path(run_dir) / ARRAY_FILE.format(name), allow_pickle=False)
                for name in PARAMETER_ARRAYS[config.mechanism]
            }
        )
        return config, encoder.eval(), decoder.eval(), params

    def privatize(self, run_dir, run: dict):
        config, encoder, decoder, params = self.load(run_dir, run)
        return make_privatize(encoder, decoder, config.sensitive_dim, config.mechanism, params,
                              sensor_step(run["output"]), run["seed"], config.release)

    def graphs(self, run_dir, run: dict) -> dict:
        config, encoder, decoder, _ = self.load(run_dir, run)
        if config.release == "mean":
            return {"encoder": Graph(MeanEncoder(encoder).eval()), "decoder": Graph(decoder, input_from="encoder")}
        mean_of = MeanEncoder(encoder).eval()     # the decoder's representative inputs: posterior means

        def decoder_inputs(model_inputs: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return mean_of(torch.as_tensor(model_inputs)).numpy()
        return {"encoder": Graph(PosteriorEncoder(encoder).eval()), "decoder": Graph(decoder, inputs=decoder_inputs)}

    def bundle(self, run_dir, run: dict, dataset, out_dir: Path, include_samples: bool = True):
        config, _, _, params = self.load(run_dir, run)
        self.save_params(Path(out_dir), params)
        # the noise's scalars go into the stage alone, where the device reads and checks them
        stage = SanitizerEntry(config.mechanism, config.sensitive_dim, config.clip_norm, config.epsilon)
        entry = {
            "name": self.name,
            "kind": self.kind,
            "useful": run["useful"],
            "private": run["private"],
            "parameters": {
                "latent_dim": config.latent_dim,
                "sensitive_dim": config.sensitive_dim,
                "mechanism": config.mechanism,
                "beta": config.beta,
                "release": config.release,
            },
        }
        draw = [PosteriorSampleEntry(config.latent_dim)] if config.release == "sample" else []
        stages = [ModelEntry("encoder"), *draw, stage, ModelEntry("decoder")]
        return BundleParts(entry, [stage.to_manifest() for stage in stages])


register(SanitizerMechanism())
