"""PR-GAN (Rezaei et al.): a perturbation generator G trained against fixed classifiers D_y, D_z
and a GAN discriminator D, with the baselines of the paper's Table 2 (NGP, AP, Laplace).

Section 5.3's protocol: three slices equal in size and class proportions; slice 1 trains D_y and
D_z, slice 2 trains G and D (we hold 20% of it out to choose the perturbation budget), slice 3 tests.
Section 6.4: the perturbation is chosen as large as possible while Acc(D_y) stays at or above a
utility threshold; we sweep the hinge margin c of eq. 10 and pick on the held-out part of slice 2.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.runtime.stages.model import ModelEntry
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.evaluation import Task, baselines, dataset_slices, evaluate, raw_reference
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import BundleParts, Graph, Mechanism, TrainRequest, load_run_dataset, protocol_task
from sensorveil.sdk.networks import make_classifier, make_generator
from sensorveil.sdk.priors import maximum_entropy_distribution
from sensorveil.sdk.rundir import RunRecord
from sensorveil.sdk.training import (
    accuracy,
    apply,
    batches,
    model_shape,
    progress_bar,
    sensor_step,
    set_seed,
    snap_to_sensor,
    tensor_spec_dict,
    to_model,
    train_classifier,
)

GENERATOR_FILE = "generator.pt"
# Datasets whose sweep needs wider margins than the default. UJIIndoorLoc's binary fingerprints: the fixed
# D_z only drops to the paper's level once G may flip several access points (docs/results.md, made by
# scripts/make_results.py, holds the UJIIndoorLoc figures at these margins).
DATASET_MARGINS = {"ujiindoorloc": (0.2, 0.5, 1.0, 1.5)}
# the fixed D_y / D_z's learning-rate schedule where the constant rate under-trains them: synthetic
# depth (docs/depth_raw_accuracy.md, made by scripts/depth_raw_accuracy.py, compares the schedules).
# Digits and WiFi keep the constant rate their published figures were measured with.
DATASET_CLASSIFIER_SCHEDULES = {"synthetic-depth": "cosine"}

VARIANTS = ("prgan", "ngp", "ap")   # ngp: no GAN discriminator D; ap: no target classifier D_y


@dataclass
class PRGANConfig:
    alpha: float = 1.0                 # eq. 11 weight of L_Adv
    beta: float = 10.0                 # eq. 11 weight of L_hinge
    # eq. 10's margin c, as fractions of the mean ||x|| of the data: the sweep of section 6.4
    margin_fractions: tuple = (0.05, 0.1, 0.2, 0.35, 0.5)
    epochs: int = 30
    classifier_epochs: int = 20
    classifier_lr_schedule: str = "constant"   # train_classifier's lr_schedule for the fixed D_y / D_z
    batch_size: int = 64
    lr_generator: float = 5e-4
    lr_discriminator: float = 2e-4
    utility_threshold: float = 0.95
    laplace_epsilons: tuple = tuple(float(e) for e in np.logspace(-2, 1, 13))   # 0.01 .. 10 (section 6.4)
    seed: int = 0
    progress: bool = True


def default_config(dataset: str, utility_threshold: float, seed: int = 0) -> PRGANConfig:
    """The config a run on ``dataset`` starts from: section 6.4's threshold and the dataset's margin sweep."""
    config = PRGANConfig(utility_threshold=utility_threshold, seed=seed)
    config.margin_fractions = DATASET_MARGINS.get(dataset, config.margin_fractions)
    config.classifier_lr_schedule = DATASET_CLASSIFIER_SCHEDULES.get(dataset, config.classifier_lr_schedule)
    return config


@dataclass
class Experiment:
    """The data, splits and fixed classifiers shared by PR-GAN and its baselines."""
    dataset: SensorDataset
    useful_name: str
    private_name: str
    config: PRGANConfig
    x: torch.Tensor = field(repr=False)
    useful: np.ndarray = field(repr=False)
    private: np.ndarray = field(repr=False)
    med: np.ndarray = field(repr=False)
    slices: dict = field(repr=False)
    fixed: dict = field(repr=False, default_factory=dict)

    @property
    def task(self) -> Task:
        return protocol_task(self.dataset, self.useful_name, self.private_name, self.config.seed, x=self.x)

    @property
    def step(self) -> float:
        """The sensor's value grid in model units (0: continuous), which G trains through."""
        return sensor_step(tensor_spec_dict(self.dataset, "y"))

    def generate(self, G: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """What the bundle emits for x, in model units: G's output snapped to the sensor's grid."""
        return snap_to_sensor(G(x), self.step)


def prepare(dataset: SensorDataset, useful: str, private: str, config: PRGANConfig,
            fixed: dict | None = None) -> Experiment:
    """Build the splits, the MED of eq. 3 and train the fixed classifiers D_y, D_z on slice 1
    (or take already trained ones, when re-evaluating a saved run)."""
    for name in (useful, private):
        if name not in dataset.attributes:
            raise ValueError(f"dataset {dataset.name!r} has no attribute {name!r}; "
                             f"expected one of {sorted(dataset.attributes)}")
    set_seed(config.seed)
    n_y, n_z = dataset.num_classes[useful], dataset.num_classes[private]
    y, z = dataset.attributes[useful], dataset.attributes[private]
    exp = Experiment(dataset=dataset, useful_name=useful, private_name=private, config=config,
                     x=to_model(dataset), useful=y, private=z,
                     med=maximum_entropy_distribution(dataset.prior(useful, private), n_y, n_z),
                     slices=dataset_slices(dataset, useful, private, config.seed))
    if fixed is not None:
        exp.fixed = fixed
        return exp
    first = exp.slices["classifiers"]
    shape = model_shape(dataset)
    for key, labels, classes in (("D_y", y, n_y), ("D_z", z, n_z)):
        net = make_classifier(dataset.modality, shape, classes)
        exp.fixed[key] = train_classifier(net, exp.x[first], labels[first], epochs=config.classifier_epochs,
                                          desc=f"{key} ({useful if key == 'D_y' else private})",
                                          progress=config.progress, seed=config.seed,
                                          lr_schedule=config.classifier_lr_schedule)
        exp.fixed[key].requires_grad_(False)
    return exp


def generator_loss(variant: str, x, fake, y, med_rows, D, fixed, c: float, config: PRGANConfig):
    # eq. 9: L_GAN = E log(1 - D(G(x))), with D(.) = sigmoid(logit); absent in NGP.
    l_gan = F.logsigmoid(-D(fake)).mean() if variant != "ngp" else fake.new_zeros(())
    # eq. 8: L_Adv = E[ l(D_y(G(x)), y) + CE(D_z(G(x)) | y, MED(z|y)) ]; AP drops the D_y term.
    l_util = F.cross_entropy(fixed["D_y"](fake), y) if variant != "ap" else fake.new_zeros(())
    l_priv = -(med_rows * F.log_softmax(fixed["D_z"](fake), dim=1)).sum(1).mean()
    # eq. 10: L_hinge = E max(0, ||G(x) - x|| - c)
    l_hinge = F.relu((fake - x).flatten(1).norm(dim=1) - c).mean()
    # eq. 11: L_G = L_GAN + alpha L_Adv + beta L_hinge
    return l_gan + config.alpha * (l_util + l_priv) + config.beta * l_hinge


def discriminator_loss(D, x, fake):
    # eq. 7 with D(x) = P(x is real): minimised in its cross-entropy form
    # -[log D(x) + log(1 - D(G(x)))], which has the same optimal D as Lemma 1.
    real, fake_logits = D(x), D(fake)
    return (F.binary_cross_entropy_with_logits(real, torch.ones_like(real))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))


def train_generator(exp: Experiment, variant: str, c: float, desc: str, make=None, condition=None) -> nn.Module:
    """Alternate D and G updates (section 5.1) with D_y and D_z fixed.

    By default G reads x alone and eq. 8 pulls D_z(G(x)) toward MED(z|y). A variant trains another
    generator through this same loop: ``make()`` builds it and ``condition(x, y)`` returns (G's input,
    the rows eq. 8's cross-entropy pulls D_z toward) per batch (prgan_med: G(x, y, z', noise), toward z')."""
    cfg, shape = exp.config, model_shape(exp.dataset)
    set_seed(cfg.seed)
    G = make() if make is not None else make_generator(exp.dataset.modality, shape)
    D = make_classifier(exp.dataset.modality, shape, 1)
    opt_g = torch.optim.Adam(G.parameters(), lr=cfg.lr_generator, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=cfg.lr_discriminator, betas=(0.5, 0.999))
    idx = exp.slices["generator_train"]
    x_all, y_all = exp.x[idx], torch.as_tensor(exp.useful[idx])
    med = torch.as_tensor(exp.med, dtype=torch.float32)
    condition = condition or (lambda x, y: (x, med[y]))
    gen = torch.Generator().manual_seed(cfg.seed)
    for _ in progress_bar(range(cfg.epochs), desc, cfg.progress):
        G.train(), D.train()
        for batch in batches(len(x_all), cfg.batch_size, gen):
            x, y = x_all[batch], y_all[batch]
            inputs, targets = condition(x, y)
            fake = exp.generate(G, inputs)     # D, D_y and D_z see the values the device will emit
            if variant != "ngp":
                opt_d.zero_grad()
                discriminator_loss(D, x, fake.detach()).backward()
                opt_d.step()
            opt_g.zero_grad()
            generator_loss(variant, x, fake, y, targets, D, exp.fixed, c, cfg).backward()
            opt_g.step()
    return G.eval()


def held_out_scores(exp: Experiment, privatize) -> dict:
    val = exp.slices["generator_val"]
    x = privatize(exp.x[val])
    return {"val_acc_useful": accuracy(exp.fixed["D_y"], x, exp.useful[val]),
            "val_acc_private": accuracy(exp.fixed["D_z"], x, exp.private[val])}


def choose(sweep: list, threshold: float) -> tuple[int, bool]:
    """Section 6.4: the most private setting whose Acc(D_y) stays at or above the threshold;
    if none does, the most useful one, flagged so reports say the threshold was missed."""
    ok = [i for i, point in enumerate(sweep) if point["val_acc_useful"] >= threshold]
    if ok:
        return min(ok, key=lambda i: (sweep[i]["val_acc_private"], -sweep[i]["val_acc_useful"])), True
    return max(range(len(sweep)), key=lambda i: sweep[i]["val_acc_useful"]), False


def fit_variant(exp: Experiment, variant: str = "prgan", train=None, release=None,
                name: str | None = None) -> tuple[nn.Module, dict]:
    """Train one generator per margin c and keep the one section 6.4 chooses. A variant with its own
    generator (prgan_med) passes ``train(c, desc) -> G`` and ``release(G)``, the model-units function
    the held-out scores are measured on, and the ``name`` its selection record carries."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown PR-GAN variant {variant!r}; expected one of {VARIANTS}")
    name = name or variant
    train = train or (lambda c, desc: train_generator(exp, variant, c, desc))
    release = release or (lambda G: lambda t: snap_to_sensor(apply(G, t), exp.step))
    scale = float(exp.x[exp.slices["generator_train"]].flatten(1).norm(dim=1).mean())
    sweep, models = [], []
    for fraction in exp.config.margin_fractions:
        c = fraction * scale
        G = train(c, f"{name} G (c={c:.2f})")
        sweep.append({"margin_fraction": fraction, "margin_c": c, **held_out_scores(exp, release(G))})
        models.append(G)
    best, met = choose(sweep, exp.config.utility_threshold)
    return models[best], {"variant": name, "sweep": sweep, "chosen": best, "threshold_met": met,
                          "margin_c": sweep[best]["margin_c"]}


def laplace_privatize(scale_b: float, seed: int | None = None, step: float = 0.0):
    """Laplace mechanism baseline (section 6.2): independent Lap(b) noise per feature, in model
    units where each feature spans [0, 1] (sensitivity 1), so it is (1/b)-DP per feature; the
    result snapped to the sensor's value grid (``step``), as a device would have to emit it.
    Seeded only when the caller passes a seed; otherwise the OS entropy picks the stream."""
    rng = torch.Generator()
    rng.manual_seed(seed if seed is not None else int(np.random.SeedSequence().entropy % (2**63)))

    def privatize(x: torch.Tensor) -> torch.Tensor:
        # inverse CDF: u ~ U(-1/2, 1/2), noise = -b sign(u) ln(1 - 2|u|)
        u = torch.rand(x.shape, generator=rng) - 0.5
        noise = -scale_b * torch.sign(u) * torch.log1p(-2 * u.abs().clamp(max=0.4999999))
        return snap_to_sensor((x + noise).clamp(0.0, 1.0), step)
    return privatize


def fit_laplace(exp: Experiment) -> tuple[float, dict]:
    """Section 6.4: the smallest epsilon (largest noise) whose Acc(D_y) stays above the threshold."""
    sweep = []
    for epsilon in exp.config.laplace_epsilons:
        scores = held_out_scores(exp, laplace_privatize(1.0 / epsilon, exp.config.seed, exp.step))
        sweep.append({"epsilon": epsilon, **scores})
    ok = [point for point in sweep if point["val_acc_useful"] >= exp.config.utility_threshold]
    chosen = min(ok, key=lambda p: p["epsilon"]) if ok else max(sweep, key=lambda p: p["val_acc_useful"])
    return chosen["epsilon"], {"variant": "laplace", "sweep": sweep, "chosen": sweep.index(chosen),
                               "threshold_met": bool(ok), "epsilon": chosen["epsilon"]}


def config_dict(config: PRGANConfig) -> dict:
    return {key: (list(value) if isinstance(value, tuple) else value) for key, value in asdict(config).items()}


# -- the registered mechanisms ------------------------------------------------------------------
def load_fixed(run_dir, run: RunRecord, data: SensorDataset) -> dict:
    """The defender's D_y and D_z saved with the run (state dicts, weights_only)."""
    fixed = {}
    for key, attr in (("D_y", run.useful), ("D_z", run.private)):
        net = make_classifier(run.modality, run.model_shape, data.num_classes[attr])
        net.load_state_dict(torch.load(Path(run_dir) / f"{key}.pt", weights_only=True))
        fixed[key] = net.eval().requires_grad_(False)
    return fixed


def reload_experiment(run_dir, run: RunRecord) -> Experiment:
    """The run's data, splits and fixed classifiers, rebuilt without retraining anything."""
    data = load_run_dataset(run)
    cfg = PRGANConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in run.config.items()})
    return prepare(data, run.useful, run.private, cfg, fixed=load_fixed(run_dir, run, data))


def load_generator(run_dir, run: RunRecord) -> nn.Module:
    G = make_generator(run.modality, run.model_shape)
    G.load_state_dict(torch.load(Path(run_dir) / GENERATOR_FILE, weights_only=True))
    return G.eval()


class PerturbationMechanism(Mechanism):
    """PR-GAN or one of its Table 2 baselines: a generator G trained against fixed D_y and D_z."""

    kind = "perturbation"
    config_class = PRGANConfig

    def __init__(self, name: str, summary: str):
        self.name, self.summary = name, summary

    def make_config(self, request: TrainRequest) -> PRGANConfig:
        if request.config is None:   # section 6.4's threshold is the dataset's, unless the caller chose
            dataset = getattr(request.data, "name", "")   # no data yet when a caller only asks for the config
            request.config = default_config(dataset, request.utility_threshold, request.seed)
        config = super().make_config(request)
        config.epochs = request.epochs or config.epochs
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = self.only_one(request.useful, "useful"), self.only_one(request.private, "private")
        config = self.make_config(request)
        exp = prepare(request.data, useful, private, config)
        privatize, selection = self.fit(exp, request.out)
        for key in ("D_y", "D_z"):
            torch.save(exp.fixed[key].state_dict(), Path(request.out) / f"{key}.pt")
        task = exp.task
        return {**request.base, "useful": useful, "private": private, "seed": config.seed, "kind": self.kind,
                "config": config_dict(config), "selection": selection,
                "reference": {**raw_reference(task, exp.fixed), **baselines(task),
                              "utility_threshold": config.utility_threshold},
                "metrics": evaluate(task, privatize, exp.fixed, attacker_epochs=request.attacker_epochs,
                                    seed=config.seed)}

    def fit(self, exp: Experiment, out: Path):
        """Train, save what the bundle needs, return (model-units privatize function, selection record)."""
        G, selection = fit_variant(exp, self.name)
        torch.save(G.state_dict(), Path(out) / GENERATOR_FILE)
        return (lambda x: snap_to_sensor(apply(G, x), exp.step)), selection

    def task(self, run_dir, run: RunRecord):
        exp = reload_experiment(run_dir, run)
        return exp.task, exp.fixed

    def privatize(self, run_dir, run: RunRecord):
        G, step = load_generator(run_dir, run), sensor_step(run.output)
        return lambda x: snap_to_sensor(apply(G, x), step)

    def graphs(self, run_dir, run: RunRecord) -> dict:
        return {"model": Graph(load_generator(run_dir, run))}

    def bundle(self, run_dir, run: RunRecord, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        selection = (run.selection or {})
        entry = {"name": run.mechanism, "kind": self.kind, "useful": run.useful, "private": run.private,
                 "parameters": {"margin_c": selection.get("margin_c"), **{
                     key: run.config[key] for key in ("alpha", "beta", "utility_threshold")}}}
        return BundleParts(entry, [ModelEntry("model").to_manifest()])


class LaplaceBaseline(PerturbationMechanism):
    """Section 6.2's Laplace mechanism: noise in numpy, no network; evaluated, not exported."""

    exportable = False

    def fit(self, exp: Experiment, out: Path):
        epsilon, selection = fit_laplace(exp)
        return laplace_privatize(1.0 / epsilon, step=exp.step), selection

    def privatize(self, run_dir, run: RunRecord):
        return laplace_privatize(1.0 / run.selection["epsilon"], step=sensor_step(run.output))

    def graphs(self, run_dir, run: RunRecord) -> dict:
        raise ValueError("the laplace baseline has no network to export; it adds noise in numpy")


register(PerturbationMechanism("prgan", "PR-GAN perturbation generator (PR-GAN eq. 7-11)"))
register(PerturbationMechanism("ngp", "PR-GAN without the GAN discriminator (Table 2 baseline)"))
register(PerturbationMechanism("ap", "PR-GAN without the target classifier D_y (Table 2 baseline)"))
register(LaplaceBaseline("laplace", "Laplace noise per feature, epsilon chosen by section 6.4 (Table 2 baseline)"))
