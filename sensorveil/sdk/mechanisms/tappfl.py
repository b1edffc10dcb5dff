"""TAPPFL (Arevalo et al., AAAI 2024, ../shared/papers/tappfl.md): task-agnostic privacy-preserving
representation learning in federated learning, against attribute inference.

Every device i holds three networks: the feature extractor f_Theta (the representation r = f(x) that
is released), the privacy-protection network g_Psi (the auxiliary posterior q_Psi(u|r) of the private
attribute u) and the utility-preservation network h_Omega (a critic on (x, r, u)). Only f is
federated: FedAvg on Flower averages Theta, while Psi and Omega stay on the device across rounds.

The bounds, as the paper writes them:

* privacy, eq. 2: I(r; u) <= I_vCLUB = E_p(r,u)[log q_Psi(u|r)] - E_p(r)p(u)[log q_Psi(u|r)], valid
  while q_Psi meets the condition under eq. 2 (KL(p(r,u)||q) <= KL(p(r)p(u)||q)); Psi is trained for it
  by eq. 3, max_Psi E_p(r,u)[log q_Psi(u|r)] (the cross-entropy of g_Psi). f minimises I_vCLUB.
  Eq. 4 and 7 then keep only the first term (min_Theta max_Psi E log q), which is the adversarial
  cross-entropy the authors' code trains; ``privacy_bound="ce"`` runs that form for comparison, the
  default ``"vclub"`` the bound of eq. 2.
* utility, eq. 5-6 estimated with the JSD form of "Implementation in practice":
  I_JSD = E[-sp(-h(x, f(x), u))] - E[sp(h(x_bar, f(x), u))], x_bar an independent sample from the
  device's data, sp the softplus. f and h both maximise it.
* eq. 7: the device objective max_Theta lambda * (privacy term) + (1 - lambda) * (utility term); f
  descends lambda * I_vCLUB - (1 - lambda) * I_JSD.

Algorithm 1's DeviceUpdate per mini-batch: one SGD step of Psi (eq. 3), of Omega (JSD), then of Theta
(eq. 7), for E local epochs with batch B. Its line 18 descends lambda * CE_loss + ..., which would
help the adversary (eq. 4 and 7 maximise the CE over Theta); we follow eq. 4/7's direction.

Choices where the paper is silent or ambiguous (also in the README and the results page):

* pre-training of f ("we first pretrain the feature extractor network only"): federated rounds of the
  utility term alone (lambda = 0, g untouched), from one seeded initialisation the server broadcasts;
* x_bar is drawn from p(x), as written, not from p(x|u): by the chain rule I(x; r, u) = I(x; u) +
  I(x; r | u) and I(x; u) does not depend on Theta, so the estimate moves with I(x; r | u);
* p(u) in eq. 2's second term is the device's own label distribution (the bound is per device);
* Table 3's architectures are garbled in the paper's HTML; we use its tabular column's widths where
  legible (f: 64-128-d, g: 64-128-128-K) and end f with tanh, so r is bounded as Theorem 1 assumes;
* evaluation, two measures side by side in run["metrics"]: ``paper_inference_accuracy``, the paper's own
  (each device's g on the global f's representation of rows it held out, mean over devices, end of
  training; per round in the history), and fresh attackers trained on the released representations (a
  neural net and 200 extra-trees, ``probing_acc_private`` / ``tree_acc_private``), which do not stop at
  what the devices' g learnt. Random guessing is 1/K as in Table 2.
* participation: Algorithm 1 by default, DeviceUpdate on every device every round (lines 3-5) and
  FedAvg over rho M of them (lines 21-23); ``participation="sampled"`` trains only the rho M.

This module is the mechanism the registry loads (TAPPFLMechanism); its parts live in
sensorveil.sdk.mechanisms.tappfl_parts, one job per module, and are re-exported here.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from sensorveil.sdk.audit import Release
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.federated.differential_privacy import privacy_metrics, privacy_record
from sensorveil.sdk.mechanisms import register
from sensorveil.sdk.mechanisms.base import Graph, Mechanism, TrainRequest, bundle_privatize
from sensorveil.sdk.mechanisms.tappfl_parts.bundle import (
    FEATURE_FILE,
    HISTORY_FILE,
    WEIGHTS_KEY,
    bundle_entry,
    load_feature_extractor,
    pretrained_path,
    representation_spec,
)
from sensorveil.sdk.mechanisms.tappfl_parts.client import (
    STATE_KEYS,
    UPDATES_KEY,
    device_evaluate,
    device_inputs,
    device_train,
    node_identity,
    round_generator,
    updates_done,
)
from sensorveil.sdk.mechanisms.tappfl_parts.config import BOUNDS, PHASES, LocalSettings, TAPPFLConfig, check_config
from sensorveil.sdk.mechanisms.tappfl_parts.data import (
    PAPER_ROWS_PER_DEVICE,
    DeviceData,
    device_data,
    device_partitions,
    heldout_split,
    paper_scale_clients,
    partition_record,
    training_rows,
)
from sensorveil.sdk.mechanisms.tappfl_parts.device import (
    device_step,
    device_update,
    local_attack_probe,
    paper_inference_accuracy,
    sgd_step,
)
from sensorveil.sdk.mechanisms.tappfl_parts.evaluate import (
    paper_figures,
    raw_figures,
    reference_figures,
    representation_release,
    score,
)
from sensorveil.sdk.mechanisms.tappfl_parts.federation import (
    CLIENT_APP,
    SERVER_APP,
    SIMULATION_APPS,
    federate,
    federation_spec,
    flower_version,
)
from sensorveil.sdk.mechanisms.tappfl_parts.losses import (
    jsd_mutual_information,
    negatives,
    privacy_condition_loss,
    privacy_term,
    theta_objective,
    vclub_upper_bound,
)
from sensorveil.sdk.mechanisms.tappfl_parts.model import (
    DeviceNetworks,
    UtilityCritic,
    feature_extractor,
    privacy_network,
)
from sensorveil.sdk.mechanisms.tappfl_parts.server import (
    RoundLog,
    flower_apps,
    initial_feature_extractor,
    phase_config,
    run_server,
    server_strategy,
    simulation_apps,
    strategy_settings,
)
from sensorveil.sdk.rundir import RunRecord, as_record

MECHANISM = "tappfl"

__all__ = [
    "MECHANISM", "TAPPFLMechanism",
    # config
    "PHASES", "BOUNDS", "TAPPFLConfig", "check_config", "LocalSettings",
    # model
    "feature_extractor", "privacy_network", "UtilityCritic", "DeviceNetworks",
    # losses
    "vclub_upper_bound", "privacy_condition_loss", "jsd_mutual_information", "negatives", "privacy_term",
    "theta_objective",
    # device
    "sgd_step", "device_step", "device_update", "paper_inference_accuracy", "local_attack_probe",
    # data
    "PAPER_ROWS_PER_DEVICE", "DeviceData", "paper_scale_clients", "heldout_split", "training_rows", "device_data",
    "device_partitions", "partition_record",
    # client
    "STATE_KEYS", "UPDATES_KEY", "updates_done", "node_identity", "device_inputs", "round_generator", "device_train",
    "device_evaluate",
    # server
    "RoundLog", "phase_config", "initial_feature_extractor", "server_strategy", "strategy_settings", "run_server",
    "simulation_apps", "flower_apps",
    # federation
    "SIMULATION_APPS", "SERVER_APP", "CLIENT_APP", "federation_spec", "federate", "flower_version",
    # evaluate
    "representation_release", "score", "reference_figures", "raw_figures", "paper_figures",
    # bundle
    "FEATURE_FILE", "HISTORY_FILE", "representation_spec", "load_feature_extractor", "pretrained_path",
    "bundle_entry",
]


class TAPPFLMechanism(Mechanism):
    """TAPPFL: a federated feature extractor whose representations hide one private attribute."""

    name = MECHANISM
    kind = "representation"
    summary = "TAPPFL federated privacy-preserving representation (eq. 2-7, Algorithm 1) on Flower"
    config_class = TAPPFLConfig

    def make_config(self, request: TrainRequest) -> TAPPFLConfig:
        config = super().make_config(request)
        config.rounds = request.epochs if request.epochs is not None else config.rounds
        return config

    def train(self, request: TrainRequest) -> dict:
        useful, private = self.only_one(request.useful, "useful"), self.only_one(request.private, "private")
        config = self.make_config(request)
        check_config(config, request.data, private)
        out = Path(request.out)
        spec = federation_spec(request.data, request.base, useful, private, config, out)
        seconds = federate(spec, out, config)
        rounds = json.loads((out / HISTORY_FILE).read_text())
        run = {**request.base, "useful": useful, "private": private, "seed": config.seed, "kind": self.kind,
               "output": representation_spec(config.representation_dim), "config": asdict(config),
               WEIGHTS_KEY: FEATURE_FILE,
               "federation": {"runtime": config.federation, "flower": flower_version(),
                              "wall_seconds": round(seconds, 1),
                              "partition": partition_record(request.data, useful, private, config),
                              "rounds": rounds, "secure_aggregation": config.secure_aggregation,
                              "differential_privacy": privacy_record(asdict(config), rounds)}}
        task, _ = self.task(out, as_record(run))
        run["reference"] = reference_figures(task)
        if config.reference_attacks:
            run["reference"].update(raw_figures(task, request.attacker_epochs, config.seed))
        release = self.release(out, as_record(run))
        attacked = (self.evaluate_release(release, request.attacker_epochs, config.seed) if config.release_attacks
                    else {"n_attacker_train": int(len(release.task.attacker_train)),
                          "n_test": int(len(release.task.test))})
        run["metrics"] = {**attacked,
                          **paper_figures(run["federation"]["rounds"], int(request.data.num_classes[private])),
                          **privacy_metrics(run["federation"]["differential_privacy"])}
        return run

    def privatize(self, run_dir, run: RunRecord):
        """f_Theta in torch: model units in, the representation out (what the device releases)."""
        return load_feature_extractor(run_dir, run)

    def release(self, run_dir, run: RunRecord, privatizer=None) -> Release:
        """The representations of the protocol's rows, from the trained f or, given a loaded bundle,
        exactly as the device computes them (sensor units through the runtime)."""
        task, _ = self.task(run_dir, run)
        represent = bundle_privatize(privatizer) if privatizer is not None else self.privatize(run_dir, run)
        return representation_release(task, represent)

    @staticmethod
    def evaluate_release(release: Release, attacker_epochs: int, seed: int) -> dict:
        return {"n_attacker_train": int(len(release.task.attacker_train)), "n_test": int(len(release.task.test)),
                **score(release, attacker_epochs, seed)}

    def evaluate_run(self, run_dir, run: RunRecord, attacker_epochs: int = 20) -> dict:
        release = self.release(run_dir, run)
        return {**reference_figures(release.task), **self.evaluate_release(release, attacker_epochs, run.seed)}

    def evaluate_bundle(self, bundle_dir, backend: str, run_dir, run: RunRecord, attacker_epochs: int = 20) -> dict:
        from sensorveil.runtime import Privatizer
        privatizer = Privatizer.load(bundle_dir, backend=backend)
        release = self.release(run_dir, run, privatizer)
        return {"backend": privatizer.backend_name, "emits": privatizer.emits, **reference_figures(release.task),
                **self.evaluate_release(release, attacker_epochs, run.seed)}

    def graphs(self, run_dir, run: RunRecord) -> dict:
        return {"model": Graph(load_feature_extractor(run_dir, run))}

    def bundle(self, run_dir, run: RunRecord, dataset: SensorDataset, out_dir: Path, include_samples: bool = True):
        return bundle_entry(run, self.name, self.kind)


register(TAPPFLMechanism())
