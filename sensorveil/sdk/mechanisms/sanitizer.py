"""Sanitizer: an alpha-beta-VAE whose latent is split into a sensitive part z_S and a non-sensitive part
z_NS, and a mechanism that replaces z_S before decoding (section 3 of the Sanitizer paper).

Training minimises eq. 5, alpha1 L1 + alpha2 L2 + alpha3 L3 - alpha4 L4 (eq. 1-4; sanitizer_parts/model.py).
beta (eq. 1, above 1) and alpha2..alpha4 (alpha1 = 1) are chosen from the config's grids on a validation split
carved from the training rows (sanitizer_parts/choice.py); the chosen values and the grid with each
candidate's validation figures go into run.json ("config" and "choice"). The model is then trained on all the
training rows with them.

The release (section 3.1; sanitizer_parts/release.py): z drawn from q_phi(z|x) (release="sample", the
default, as section 3.1 writes z_S, z_NS ~ q_phi(x)) or its mean (release="mean"), z_S replaced under one of
four mechanisms, decoded. Generalization's centroids and sampling's mixture are fitted on the training rows'
z_S as released (draws for "sample"). The device runs the same steps in numpy
(sensorveil.runtime.stages.posterior and .sanitizer) between the encoder and decoder graphs.

The run's CAS (section 4.3): the useful attribute's with the true labels the release keeps (Y_NS), the private
attribute's with y~_S = g_u(z~_S), the label section 3.1 d releases in D~, scored on raw test rows.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from sensorveil.runtime.stages.model import ModelEntry
from sensorveil.runtime.stages.posterior import PosteriorSampleEntry
from sensorveil.runtime.stages.sanitizer import ARRAY_FILE, MECHANISMS, PARAMETER_ARRAYS, SanitizerEntry
from sensorveil.sdk.evaluation import baselines, evaluate
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import BundleParts, Graph, Mechanism, TrainRequest, protocol_task
from sensorveil.sdk.mechanisms.sanitizer_parts.choice import candidates, choose
from sensorveil.sdk.mechanisms.sanitizer_parts.model import (  # noqa: F401 (the names scripts and tests use)
    Decoder,
    Encoder,
    MeanEncoder,
    PosteriorEncoder,
    distance_correlation,
    fit,
    head,
)
from sensorveil.sdk.mechanisms.sanitizer_parts.release import (  # noqa: F401
    apply_release,
    cas,
    fit_parameters,
    make_privatize,
    make_release,
    mechanism_parameters,
    normalized_hypervolume,
    private_cas,
)
from sensorveil.sdk.rundir import RunRecord
from sensorveil.sdk.training import sensor_step

WEIGHTS_FILE = "sanitizer.pt"
MECHANISM_PARAMETERS = "mechanism_parameters"   # the Sanitizer's section of run.json: the mechanism's scalars
RELEASES = ("sample", "mean")     # what the encoder hands the mechanism: a draw of q_phi(z|x), or its mean
DEFAULT_EPOCHS = {"digits": 80, "ujiindoorloc": 15}


@dataclass
class SanitizerConfig:
    latent_dim: int = 16             # m
    sensitive_dim: int = 4           # k: z_S is the first k components
    beta: float = 4.0                # eq. 1's KL weight: set by the choice from beta_grid
    alpha1: float = 1.0              # eq. 5's weights: alpha1 fixed, the others set by the choice from alpha_grid
    alpha2: float = 1.0
    alpha3: float = 1.0
    alpha4: float = 1.0
    beta_grid: tuple = (1.5, 2.0, 4.0)                   # every value above 1; one value and one alpha row: no search
    alpha_grid: tuple = ((1.0, 1.0, 1.0), (10.0, 10.0, 10.0))    # (alpha2, alpha3, alpha4) rows
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
        candidates(config)     # a beta of 1 or less is refused before any work
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = self.only_one(request.useful, "useful"), self.only_one(request.private, "private")
        config = self.make_config(request)
        task = protocol_task(request.data, useful, private, config.seed)
        epochs = config.epochs or DEFAULT_EPOCHS.get(request.data.name, 40)
        step = sensor_step(request.base["output"])
        chosen, choice = choose(task, task.attacker_train, config, epochs, step)
        config = replace(config, **chosen)
        encoder, decoder, aligner, history = fit(task, task.attacker_train, config, epochs)
        params = fit_parameters(encoder, task.x[task.attacker_train], config)
        torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(), "aligner": aligner.state_dict()},
                   Path(request.out) / WEIGHTS_FILE)
        self.save_params(Path(request.out), params)
        metrics = self.measure(task, (encoder, decoder, aligner), params, config, step, request.attacker_epochs)
        return {
            **request.base,
            "useful": useful,
            "private": private,
            "seed": config.seed,
            "kind": self.kind,
            "config": {**asdict(config), "epochs": epochs},
            "choice": choice,
            "reference": baselines(task),
            MECHANISM_PARAMETERS: {key: value for key, value in params.items() if np.ndim(value) == 0},
            "training": {"history": history},
            "metrics": metrics,
        }

    @staticmethod
    def measure(task, nets: tuple, params: dict, config: SanitizerConfig, step: float, attacker_epochs: int) -> dict:
        """The probing attack on the release, CAS (useful: true labels; private: y~_S) and the hyper-volume."""
        encoder, decoder, aligner = nets
        run = make_release(encoder, decoder, aligner, config.sensitive_dim, config.mechanism, params, step,
                           config.seed, config.release)
        metrics = evaluate(task, lambda x: run(x)[0], None, attacker_epochs=attacker_epochs, seed=config.seed)
        released, relabelled = apply_release(run, task.x[task.attacker_train])
        metrics.update(
            cas_useful=cas(task, released, task.useful, task.n_useful, attacker_epochs, config.seed),
            cas_private=private_cas(task, released, relabelled, attacker_epochs, config.seed + 1),
            relabelled_agreement=float((relabelled == task.private[task.attacker_train]).mean()),
        )
        metrics["hypervolume"] = normalized_hypervolume(
            [(metrics["probing_acc_private"], metrics["probing_acc_useful"])]
        )
        return metrics

    # -- persistence ------------------------------------------------------------------------------
    @staticmethod
    def save_params(out: Path, params: dict) -> None:
        for name, value in params.items():
            if np.ndim(value) > 0:
                np.save(out / ARRAY_FILE.format(name), np.asarray(value, np.float64), allow_pickle=False)

    def load(self, run_dir, run: RunRecord):
        """(config, encoder, decoder, mechanism parameters) of a saved run."""
        config, nets, params = self.load_all(run_dir, run)
        return config, nets["encoder"], nets["decoder"], params

    def load_all(self, run_dir, run: RunRecord):
        """(config, {"encoder", "decoder", "aligner"}, parameters); the aligner is None in runs saved before
        it was kept."""
        config = self.config_of(run)
        shape = run.model_shape
        state = torch.load(Path(run_dir) / WEIGHTS_FILE, weights_only=True)
        nets = {"encoder": Encoder(int(np.prod(shape)), config.latent_dim),
                "decoder": Decoder(config.latent_dim, shape), "aligner": None}
        if "aligner" in state:
            classes = state["aligner"]["2.bias"].shape[0]
            nets["aligner"] = head(config.sensitive_dim, classes)
        for name, net in nets.items():
            if net is not None:
                net.load_state_dict(state[name])
                net.eval()
        params = dict(run.sections.get(MECHANISM_PARAMETERS, {}))
        params.update(
            {
                name: np.load(Path(run_dir) / ARRAY_FILE.format(name), allow_pickle=False)
                for name in PARAMETER_ARRAYS[config.mechanism]
            }
        )
        return config, nets, params

    def privatize(self, run_dir, run: RunRecord):
        config, encoder, decoder, params = self.load(run_dir, run)
        return make_privatize(encoder, decoder, config.sensitive_dim, config.mechanism, params,
                              sensor_step(run.output), run.seed, config.release)

    def graphs(self, run_dir, run: RunRecord) -> dict:
        config, encoder, decoder, _ = self.load(run_dir, run)
        if config.release == "mean":
            return {"encoder": Graph(MeanEncoder(encoder).eval()), "decoder": Graph(decoder, input_from="encoder")}
        mean_of = MeanEncoder(encoder).eval()     # the decoder's representative inputs: posterior means

        def decoder_inputs(model_inputs: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return mean_of(torch.as_tensor(model_inputs)).numpy()
        return {"encoder": Graph(PosteriorEncoder(encoder).eval()), "decoder": Graph(decoder, inputs=decoder_inputs)}

    def bundle(self, run_dir, run: RunRecord, dataset, out_dir: Path, include_samples: bool = True):
        config, _, _, params = self.load(run_dir, run)
        self.save_params(Path(out_dir), params)
        # the noise's scalars go into the stage alone, where the device reads and checks them
        stage = SanitizerEntry(config.mechanism, config.sensitive_dim, config.clip_norm, config.epsilon)
        entry = {
            "name": self.name,
            "kind": self.kind,
            "useful": run.useful,
            "private": run.private,
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
