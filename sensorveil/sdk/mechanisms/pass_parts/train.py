"""PASS's training: Algorithm 1 (eq. 2 then eq. 3, AdamW + cosine schedule) and the pre-training of f."""
from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sensorveil.sdk.mechanisms.pass_parts.config import DEFAULT_EPOCHS, DEFAULT_PRETRAIN, PASSConfig
from sensorveil.sdk.mechanisms.pass_parts.data import PassData, joint_code
from sensorveil.sdk.mechanisms.pass_parts.losses import constant_c, pass_loss
from sensorveil.sdk.mechanisms.pass_parts.model import SubstitutionModel, make_embedding
from sensorveil.sdk.training import apply, batches, model_shape, progress_bar, set_seed, train_classifier


def resolved_weights(config: PASSConfig, n_useful: int, n_private: int) -> tuple[float, float]:
    """Section 5.1's defaults lambda = N / M and mu = 0.2 N (N useful, M private attributes)."""
    lam = config.lam if config.lam is not None else n_useful / n_private
    mu = config.mu if config.mu is not None else 0.2 * n_useful
    return float(lam), float(mu)


def fit(data: PassData, config: PASSConfig) -> tuple[SubstitutionModel, dict]:
    """Algorithm 1: mini-batches of the training split, eq. 2 then eq. 3, AdamW + cosine schedule."""
    set_seed(config.seed)
    lam, mu = resolved_weights(config, len(data.useful), len(data.private))
    epochs = config.epochs or DEFAULT_EPOCHS.get(data.dataset.name, 50)
    model = SubstitutionModel(make_embedding(data.dataset.modality, model_shape(data.dataset), config.embedding_dim),
                              len(data.bank_rows), config.embedding_dim, config.tau)
    rows = data.train_rows
    x = data.x[rows]
    augment = input_dropout(x, config.input_dropout)
    pretrain = pretrain_epochs(config, data.dataset.name)
    if pretrain:
        pretrain_embedding(model, data, pretrain, config)
    tensor = lambda attr, idx: torch.as_tensor(data.labels(attr)[idx], dtype=torch.long)  # noqa: E731
    private = [tensor(a, rows) for a in data.private]
    useful = [tensor(a, rows) for a in data.useful]
    bank_useful = [tensor(a, data.bank_rows) for a in data.useful]
    useful_classes = [data.classes(a) for a in data.useful]
    private_classes = [data.classes(a) for a in data.private]
    c = constant_c(len(data.private), mu, lam, len(data.bank_rows), [data.labels(a)[rows] for a in data.useful])
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = epochs * math.ceil(len(rows) / config.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    generator = torch.Generator().manual_seed(config.seed)
    excluded = conditioned_out(data, rows)
    history, started = [], time.time()
    for epoch in progress_bar(range(epochs), "PASS f, g", config.progress):
        model.train()
        sums, count = {}, 0
        for idx in batches(len(rows), config.batch_size, generator):
            log_p = model(augment(x[idx], generator))
            if excluded is not None:   # P(X'|X) renormalized over the substitutes the draw may pick
                log_p = F.log_softmax(log_p.masked_fill(excluded[idx], -1e4), dim=1)
            loss, parts = pass_loss(log_p, [s[idx] for s in private], private_classes,
                                    [u[idx] for u in useful], bank_useful, useful_classes, lam, mu)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
            count += 1
        history.append({"epoch": epoch + 1, **{k: v / count for k, v in sums.items()}})
        history[-1]["L_hat_plus_C"] = history[-1]["L_hat"] + c     # tracks the bound on L (eq. 9)
    record = {"lambda": lam, "mu": mu, "constant_C": c, "epochs": epochs, "pretrain_epochs": pretrain, "steps": steps,
              "bank_size": data.bank_size, "history": history,
              "fit_seconds": round(time.time() - started, 1)}
    return model.eval(), record


def input_dropout(x: torch.Tensor, share: float):
    """The augmentation of ``PASSConfig.input_dropout``: ``(batch, generator) -> batch`` with each entry above
    the inputs' floor (their lowest value: UJIIndoorLoc's "not heard") set to the floor with probability
    ``share``, so f learns to place a sample whose phone heard fewer access points; the identity at 0."""
    if not 0.0 <= float(share) < 1.0:
        raise ValueError(f"input_dropout={share}: expected a share from 0 to below 1")
    if not share:
        return lambda batch, generator: batch
    floor = float(x.min())

    def drop(batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        dropped = torch.rand(batch.shape, generator=generator) < share
        return torch.where(dropped, torch.full_like(batch, floor), batch)
    return drop


def pretrain_epochs(config: PASSConfig, dataset: str) -> int:
    epochs = config.pretrain_epochs if config.pretrain_epochs is not None else DEFAULT_PRETRAIN.get(dataset, 0)
    if epochs < 0:
        raise ValueError(f"pretrain_epochs must be >= 0, got {epochs}")
    return int(epochs)


def pretrain_embedding(model: SubstitutionModel, data: PassData, epochs: int, config: PASSConfig) -> None:
    """f trained as a classifier of the useful attributes (one joint label, a linear read-out that is
    then dropped), then each substitute's g set to f of its own sample: training on eq. 3 starts where
    P(X'|X) already favours substitutes that look like x, most of all in what is useful. The paper's
    f starts from a pre-trained backbone (Table 6); g's initial value is not given there."""
    labels, classes = joint_code(data, data.useful)
    classifier = nn.Sequential(model.embed, nn.Linear(config.embedding_dim, classes))
    train_classifier(classifier, data.x[data.train_rows], labels[data.train_rows], epochs=epochs,
                     desc="PASS f pre-training", progress=config.progress, seed=config.seed,
                     lr_schedule="cosine")
    with torch.no_grad():
        model.g.copy_(apply(model.embed, data.x[data.bank_rows]))


def conditioned_out(data: PassData, rows: np.ndarray) -> torch.Tensor | None:
    """(rows, bank) True where the device's conditioned draw can never pick that substitute for that row."""
    if data.condition is None:
        return None
    ones = np.ones((len(rows), len(data.bank_rows)))
    return torch.as_tensor(data.conditioned(ones, rows) == 0)
