"""PASS (Chen et al., ICML 2025, ../shared/papers/pass.md) trained federated on Flower, as TAPPFL's
devices train (../shared/papers/tappfl.md): the raw private rows stay on each device.

* Data: the substitute bank D_substitute comes from a declared source that is no device's rows
  (pass_federated_parts.bank, named by ``bank_source``): the dataset's declared bank rows, or a share of
  PASS's training split that the server holds and no device is given. Section 5.1 samples the bank from
  the training data; here the server holds it, every device is sent its labels (eq. 7's U') each round,
  and the bundle carries it, so it must be a set the server may hold. The rest of the training split
  (pass_parts.data.split_rows) is partitioned over ``clients`` devices, IID by default (TAPPFL's
  partition code, sdk.federated), and each device's rows are written to a folder of its own before the
  federation starts; a node reads only its folder (pass_federated_parts.folders), and the folders are
  removed when the federation ends.
* What leaves a device: f and g after its local steps, its row count ("num-examples") and its mean loss
  terms, once a round. What the server holds: the bank's rows, the global f and g, the updates it is sent.
* A round: every device loads the global f and g, runs PASS's mini-batch steps on its own rows for
  ``local_epochs`` (eq. 2's P(X'|X), the loss of eq. 3 with L_S, L_U and L_X of eq. 4-8, AdamW as in
  Table 6, one cosine schedule over the whole federation), and sends f and g back; the server validates
  every update (sdk.federated.validation, as TAPPFL's) and combines the valid ones with the configured
  strategy (FedAvg by default; FedMedian, FedTrimmedAvg: sdk.federated.strategy).
* After training the run directory holds the files of central PASS (weights and bank), so its export,
  bundle, runtime draw and evaluation are PASS's own (this mechanism subclasses PASSMechanism); the
  run record adds the federation: partition, and per round the devices sampled, aggregated and dropped,
  and the bank's origin (also in the bundle's manifest, mechanism.bank_origin).

Choices where neither paper speaks: the device optimiser starts fresh each round (no AdamW moments leave
a device); lambda and mu are section 5.1's defaults resolved once by the server; f and g start from
PASS's seeded initialisation, with no federated pre-training of f (``pretrain_epochs`` must be 0).
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from sensorveil.sdk import federated
from sensorveil.sdk.federated.differential_privacy import privacy_metrics, privacy_record
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import TrainRequest
from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig, check_config
from sensorveil.sdk.mechanisms.pass_federated_parts.federation import federate, federated_data, prepare_federation
from sensorveil.sdk.mechanisms.pass_federated_parts.folders import DEVICES_DIR
from sensorveil.sdk.mechanisms.pass_federated_parts.server import HISTORY_FILE
from sensorveil.sdk.mechanisms.pass_parts.bundle import BANK_FILE, HIDDEN, SUBSTITUTION, load_head, substitution_record
from sensorveil.sdk.mechanisms.pass_parts.config import config_dict
from sensorveil.sdk.mechanisms.pass_parts.data import PassData
from sensorveil.sdk.mechanisms.pass_parts.evaluate import evaluate_model
from sensorveil.sdk.mechanisms.pass_parts.losses import constant_c
from sensorveil.sdk.mechanisms.pass_substitution import PASSMechanism
from sensorveil.sdk.mechanisms.tappfl_parts.federation import flower_version
from sensorveil.sdk.rundir import as_record

MECHANISM = "pass-federated"

__all__ = ["MECHANISM", "PASSFederatedMechanism", "PassFederatedConfig", "train_pass_federated_run"]


def training_record(pdata: PassData, spec: dict, config: PassFederatedConfig, rounds: list) -> dict:
    """PASS's training figures, per round: the devices' mean loss terms and eq. 9's bound L_hat + C."""
    lam, mu = spec["weights"]["lambda"], spec["weights"]["mu"]
    c = constant_c(len(pdata.private), mu, lam, len(pdata.bank_rows),
                   [pdata.labels(a)[pdata.train_rows] for a in pdata.useful])
    history = [{"round": r["round"], **r["train"], "L_hat_plus_C": r["train"].get("L_hat", float("nan")) + c}
               for r in rounds]
    return {"lambda": lam, "mu": mu, "constant_C": c, "rounds": config.rounds, "local_epochs": config.local_epochs,
            "pretrain_epochs": 0, "bank_size": pdata.bank_size, "history": history}


def train_pass_federated_run(request: TrainRequest, config: PassFederatedConfig) -> dict:
    """Federate, then write and score the run as central PASS's train_pass_run does."""
    started, out = time.time(), Path(request.out)
    base = {**request.base, "useful": request.useful, "private": request.private, "seed": config.seed}
    pdata, plan = federated_data(request.data, request.useful, request.private, request.hidden, config)
    try:
        spec, parts = prepare_federation(pdata, plan, base, config, out)
        seconds = federate(spec, out, config)
    finally:   # the simulated devices' storage ends with the federation
        shutil.rmtree(out / DEVICES_DIR, ignore_errors=True)
    np.save(out / BANK_FILE, pdata.bank_rows, allow_pickle=False)
    rounds = json.loads((out / HISTORY_FILE).read_text())
    training = training_record(pdata, spec, config, rounds)
    labels = pdata.labels(pdata.private[0])
    run = {**base, "kind": "substitution", HIDDEN: pdata.hidden, "config": config_dict(config),
           SUBSTITUTION: substitution_record(config, pdata, training, bank_origin=plan.origin),
           "training": training,
           "federation": {"runtime": config.federation, "flower": flower_version(), "wall_seconds": round(seconds, 1),
                          "aggregation": config.aggregation,
                          "partition": {"scheme": config.partition, "by": config.partition_by or pdata.private[0],
                                        "rows_per_device": [int(len(p)) for p in parts],
                                        **federated.partition_summary(parts, lambda p: labels[p])},
                          "data": "each device's rows in a folder of its own, read by that device's node only; "
                                  "model updates leave a device, rows never do",
                          "rounds": rounds,
                          "secure_aggregation": config.secure_aggregation,
                          "differential_privacy": privacy_record(asdict(config), rounds)}}
    head = load_head(out, as_record(run))
    evaluation = evaluate_model(pdata, head, attacker_epochs=request.attacker_epochs, seed=config.seed, plot_dir=out)
    metrics = {**evaluation["metrics"], **privacy_metrics(run["federation"]["differential_privacy"])}
    return {**run, "reference": evaluation["reference"], "metrics": metrics,
            "confusion_plot": evaluation.get("confusion_plot"), "train_seconds": round(time.time() - started, 1)}


class PASSFederatedMechanism(PASSMechanism):
    """PASS's f and g trained on Flower over devices that keep their rows; bundle and evaluation are PASS's."""

    name = MECHANISM
    summary = "PASS stochastic substitution (PASS eq. 2-8) trained federated on Flower (FedAvg/FedMedian/TrimmedAvg)"
    config_class = PassFederatedConfig

    def make_config(self, request: TrainRequest) -> PassFederatedConfig:
        config = super(PASSMechanism, self).make_config(request)
        config.rounds = request.epochs if request.epochs is not None else config.rounds
        return config

    def train(self, request: TrainRequest) -> dict:
        config = self.make_config(request)
        check_config(config)
        return train_pass_federated_run(request, config)


register(PASSFederatedMechanism())
