"""PASS (Chen et al., ICML 2025): Private Attributes protection with Stochastic data Substitution.

Each input x is replaced by a sample x' of a substitute bank D_substitute (drawn from the
training split) with probability P(X'=x'|X=x) = softmax_x'(cos(f(x), g(x')) / tau) (eq. 2): f is
an embedding network, g a learnable embedding per substitute. Training minimises the loss of
eq. 3 built from L_S (eq. 4-5, private attributes), L_U (eq. 6-7, useful attributes) and L_X
(eq. 8, general features). The exported model is f with the cosine-similarity head folded in
(normalized g is a constant) and outputs eq. 2's logits; the runtime takes their softmax and draws x' in numpy
(sensorveil.runtime.stages.substitution).

Data protocol: the same three slices as PR-GAN (sensorveil.sdk.prgan.make_slices) so both are
scored on the same test rows by the same attackers: slices 1 and 2 are the defender's (and the
probing attacker's) training split, slice 3 is the test split. Datasets that carry their own
split (MotionSense's "trial" split, attribute ``trial_split``) use it instead.

This module is the mechanism the registry loads (train_pass_run and PASSMechanism); its parts live in
sensorveil.sdk.mechanisms.pass_parts, one job per module, and are re-exported here.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from sensorveil.runtime.stages.substitution import draw_indices
from sensorveil.sdk.audit import Release
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import Graph, Mechanism, TrainRequest
from sensorveil.sdk.mechanisms.pass_parts.bundle import (
    BANK_FILE,
    CONDITION_FILE,
    HIDDEN,
    SAMPLES_FILE,
    SEQUENCE_FILE,
    SUBSTITUTION,
    WEIGHTS_FILE,
    bank_sequences,
    load_bank_rows,
    load_head,
    load_model,
    substitute_samples,
    substitution_record,
    write_bundle_files,
)
from sensorveil.sdk.mechanisms.pass_parts.config import (
    DEFAULT_EPOCHS,
    DEFAULT_PRETRAIN,
    PASSConfig,
    config_dict,
    config_from_dict,
)
from sensorveil.sdk.mechanisms.pass_parts.data import (
    SPLIT_ATTRIBUTE,
    PassData,
    check_attributes,
    joint_code,
    prepare_data,
    split_rows,
)
from sensorveil.sdk.mechanisms.pass_parts.evaluate import (
    BATCH,
    CONFUSION_PLOT,
    attack_task,
    attribute_scores,
    confusion_matrices,
    evaluate_model,
    evaluate_pass_bundle,
    evaluate_pass_run,
    evaluate_substitution,
    exact_posterior_attacker,
    in_batches,
    mnag,
    nag,
    pass_release,
    random_star,
    reference,
    run_data,
)
from sensorveil.sdk.mechanisms.pass_parts.losses import (
    constant_c,
    general_loss,
    pass_loss,
    private_loss,
    row_entropy,
    useful_loss,
)
from sensorveil.sdk.mechanisms.pass_parts.model import (
    SubstitutionHead,
    SubstitutionModel,
    cosine_logits,
    depth_embedding,
    large_image_embedding,
    make_embedding,
    mlp_embedding,
    probabilities,
    small_image_embedding,
    unit_rows,
    window_embedding,
)
from sensorveil.sdk.mechanisms.pass_parts.plots import plot_confusion
from sensorveil.sdk.mechanisms.pass_parts.train import (
    conditioned_out,
    fit,
    pretrain_embedding,
    pretrain_epochs,
    resolved_weights,
)

MECHANISM = "pass"

__all__ = [
    "MECHANISM", "PASSMechanism", "train_pass_run",
    # config
    "DEFAULT_EPOCHS", "DEFAULT_PRETRAIN", "PASSConfig", "config_dict", "config_from_dict",
    # model
    "mlp_embedding", "window_embedding", "small_image_embedding", "large_image_embedding", "depth_embedding",
    "make_embedding", "unit_rows", "cosine_logits", "SubstitutionModel", "SubstitutionHead", "probabilities",
    # losses
    "row_entropy", "private_loss", "useful_loss", "general_loss", "pass_loss", "constant_c",
    # data
    "SPLIT_ATTRIBUTE", "PassData", "check_attributes", "split_rows", "prepare_data", "joint_code",
    # train
    "resolved_weights", "fit", "pretrain_epochs", "pretrain_embedding", "conditioned_out",
    # bundle
    "WEIGHTS_FILE", "BANK_FILE", "CONDITION_FILE", "SAMPLES_FILE", "SEQUENCE_FILE", "load_model", "load_head",
    "load_bank_rows", "substitute_samples", "write_bundle_files", "bank_sequences",
    # evaluate
    "CONFUSION_PLOT", "BATCH", "nag", "mnag", "attack_task", "random_star", "reference", "attribute_scores",
    "confusion_matrices", "evaluate_substitution", "in_batches", "evaluate_model", "run_data", "evaluate_pass_run",
    "evaluate_pass_bundle", "exact_posterior_attacker", "pass_release",
    # plots
    "plot_confusion",
]


# -- run directory ------------------------------------------------------------------------------
def train_pass_run(base: dict, data: SensorDataset, out: Path, config: PASSConfig, hidden=None,
                   attacker_epochs: int = 20, plots: bool = True) -> dict:
    """Train, evaluate under the probing attack, and write weights + bank into ``out``.
    ``base`` is the run record sensorveil.sdk.runs built (dataset record, specs, ...); the
    completed record is returned for runs to write as run.json."""
    started = time.time()
    pdata = prepare_data(data, base["useful"], base["private"], hidden, config.substitutes, config.seed,
                         condition=config.condition)
    model, training = fit(pdata, config)
    torch.save(model.state_dict(), out / WEIGHTS_FILE)
    np.save(out / BANK_FILE, pdata.bank_rows, allow_pickle=False)
    head = SubstitutionHead(model).eval()
    evaluation = evaluate_model(pdata, head, attacker_epochs=attacker_epochs, seed=config.seed,
                                          plot_dir=out if plots else None)
    return {**base, "kind": "substitution", HIDDEN: pdata.hidden, "config": config_dict(config),
            SUBSTITUTION: substitution_record(config, pdata, training),
            "training": training, "reference": evaluation["reference"], "metrics": evaluation["metrics"],
            "confusion_plot": evaluation.get("confusion_plot"), "train_seconds": round(time.time() - started, 1)}


# -- the registered mechanism ----------------------------------------------------------------------
class PASSMechanism(Mechanism):
    """PASS: x is replaced by a substitute drawn from a bank with P(X'|X) of eq. 2."""

    name = MECHANISM
    kind = "substitution"
    summary = "PASS stochastic substitution from a bank (PASS eq. 2-8), any number of attributes"
    config_class = PASSConfig
    multi_attribute = True

    def make_config(self, request: TrainRequest) -> PASSConfig:
        config = super().make_config(request)
        config.epochs = request.epochs or config.epochs
        return config

    def train(self, request: TrainRequest) -> dict:
        config = self.make_config(request)
        base = {**request.base, "useful": request.useful, "private": request.private, "seed": config.seed}
        return train_pass_run(base, request.data, Path(request.out), config, hidden=request.hidden,
                              attacker_epochs=request.attacker_epochs)

    def evaluate_run(self, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        return evaluate_pass_run(run_dir, run, attacker_epochs)

    def evaluate_bundle(self, bundle_dir, backend: str, run_dir, run: dict, attacker_epochs: int = 20) -> dict:
        return evaluate_pass_bundle(bundle_dir, backend, run_dir, run, attacker_epochs)

    audit_load_options = {"output": "index"}

    def release(self, run_dir, run: dict, privatizer=None) -> Release:
        """Substitutes drawn by the trained head (seeded), or by the bundle on the device (OS entropy)."""
        if privatizer is None:
            data, head = run_data(run_dir, run), load_head(run_dir, run)
            rng = np.random.default_rng([run.config["seed"], 17])
            probs = lambda rows: in_batches(lambda r: data.conditioned(probabilities(head, data.x[r]), r),  # noqa: E731
                                            rows)
            draw = lambda rows: draw_indices(probs(rows), rng)                                 # noqa: E731
        else:
            stage = privatizer.pipeline.stages[-1]
            data = run_data(run_dir, run, bank_rows=stage.bank_indices)
            probs = lambda rows: in_batches(  # noqa: E731
                lambda r: stage.conditioned(stage.probabilities(privatizer.pipeline.run_model(data.x[r].numpy())),
                                            data.known(r)), rows)
            draw = lambda rows: in_batches(  # noqa: E731
                lambda r: privatizer(data.dataset.x[r], known=data.known(r)).astype(np.int64), rows)
        return pass_release(data, probs(data.train_rows), draw(data.train_rows), draw(data.test_rows))

    def graphs(self, run_dir, run: dict) -> dict:
        return {"model": Graph(load_head(run_dir, run))}

    def bundle(self, run_dir, run: dict, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        return write_bundle_files(run_dir, run, dataset, Path(out_dir), include_samples)


register(PASSMechanism())
