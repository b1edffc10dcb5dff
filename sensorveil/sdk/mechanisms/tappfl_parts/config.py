"""TAPPFL's settings: TAPPFLConfig (the run), its checks before training, and LocalSettings (what the
server's config record tells a device for one round of Algorithm 1)."""
from __future__ import annotations

from dataclasses import dataclass

from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.federated.privacy_options import PrivacyOptions, check_privacy_options

PHASES = ("pretrain", "tappfl")
BOUNDS = ("vclub", "ce")


@dataclass
class TAPPFLConfig(PrivacyOptions):   # PrivacyOptions: Flower's SecAgg+ and differential privacy
    lam: float = 0.5                  # lambda of eq. 7 (Table 2 sweeps 0, 0.25, 0.5, 0.75, 1)
    rounds: int = 20                  # T, global rounds (experimental setup); --epochs sets it too
    pretrain_rounds: int = 5          # federated rounds of the utility term alone before TAPPFL; 0: none
    pretrained: str = ""              # a feature_extractor.pt (or run directory) to start from instead
    # M devices. The paper's scale per device, not its device count: "a total of 100 devices" (setup,
    # tappfl.md line 201) over Adult's 32,561 rows, 80% / 20% train / test (appendix B, line 591) is
    # ~326 rows a device (~260 train). Digits' 1,797 rows give devices the 1,198 of protocol slices
    # 1+2 (data.training_rows), so 4 devices of ~300 rows, ~240 train + ~60 held out (heldout below).
    # CIFAR-10's 600 a device (line 583) would leave digits 2 devices. The results script sizes other
    # datasets the same way (data.paper_scale_clients).
    clients: int = 4
    fraction: float = 0.1             # rho of Algorithm 1 (setup: 10%): "all" averages K = rho M of the
                                      # updates (line 22, at least 1), "sampled" trains only rho M devices
    participation: str = "all"        # "all": Algorithm 1 lines 3-5, DeviceUpdate on every device every
                                      # round; "sampled": only rho M devices train a round (Flower's FedAvg)
    heldout: float = 0.2              # share of each device's rows it never trains on (appendix B's 80/20
                                      # split); the paper's inference accuracy is scored on them
    local_epochs: int = 10            # E (experimental setup)
    batch_size: int = 10              # B (experimental setup)
    lr: float = 0.01                  # lr1 = lr2 = lr3, plain SGD (experimental setup)
    representation_dim: int = 16
    privacy_bound: str = "vclub"      # "vclub": eq. 2; "ce": eq. 4/7's cross-entropy form (authors' code)
    partition: str = "iid"            # "iid" or "dirichlet" (non-IID, concentration alpha)
    alpha: float = 0.5
    partition_by: str = ""            # the attribute a Dirichlet partition skews; "": the private one
    evaluate_fraction: float = 1.0    # devices per round that run @app.evaluate: the paper's inference
                                      # accuracy (own g, held-out rows) and the local attack probe
    evaluate_every: int = 1           # TAPPFL rounds between evaluations; the last round is always evaluated
                                      # (the paper's measure is the end of training's). At 100 devices an
                                      # evaluation of all of them costs more than a round of 10 training
    federation: str = "simulation"    # "simulation" (run_simulation) or "deployment" (flwr run)
    superlink: str = ""               # deployment: a SuperLink connection of $FLWR_HOME/config.toml
    timeout_s: float = 3600.0         # wall-clock limit of the whole federation; past it the run fails
    round_timeout_s: float = 600.0    # a device that has not replied by then fails the round
    cpus: int = 2                     # simulation: ClientApps run in parallel (one per CPU)
    aggregation: str = "fedavg"       # "fedavg" (weighted mean), "fedmedian" or "fedtrimmedavg": Flower's
                                      # strategies of those names (sdk/federated/strategy.py)
    trim_fraction: float = 0.2        # fedtrimmedavg: share of updates cut from each tail (Flower's beta)
    min_valid_replies: int = 0        # a round with fewer valid updates fails; 0: more than half the sample
    max_examples: int = 0             # largest "num-examples" a device may claim; 0: the largest partition
                                      # (set it when nodes train on their own data)
    max_update_ratio: float = 100.0   # drop an update moving f by more than this times its norm; 0: off
    norm_multiple: float = 2.0        # drop an update moving the model by more than this times the round's
    # median update (federated.validation); 0: off
    reference_attacks: bool = True    # also attack the raw data (the "no defence" reference)
    release_attacks: bool = True      # score the release with the run's own attackers (run.json's metrics);
                                      # off where the caller audits the release itself (the results page)
    seed: int = 0
    progress: bool = True


def check_config(config: TAPPFLConfig, data: SensorDataset, private: str) -> None:
    if not 0.0 <= config.lam <= 1.0:
        raise ValueError(f"lam={config.lam}: eq. 7's lambda must lie in [0, 1]")
    if config.privacy_bound not in BOUNDS:
        raise ValueError(f"privacy_bound={config.privacy_bound!r}; expected one of {BOUNDS}")
    if not 0.0 < config.fraction <= 1.0 or not 0.0 <= config.evaluate_fraction <= 1.0:
        raise ValueError("fraction must lie in (0, 1] and evaluate_fraction in [0, 1]")
    if config.evaluate_every < 1:
        raise ValueError(f"evaluate_every={config.evaluate_every}: expected 1 (every round) or more")
    if not 0.0 < config.heldout < 1.0:
        raise ValueError(f"heldout={config.heldout}: the held-out share of each device's rows must lie in (0, 1)")
    if config.participation not in ("sampled", "all"):
        raise ValueError(f"participation={config.participation!r}; expected 'sampled' or 'all'")
    from sensorveil.sdk.federated.strategy import check_aggregation
    per_round = (max(1, round(config.fraction * config.clients)) if config.participation == "all" else
                 max(1, int(config.fraction * config.clients)))   # the updates a round aggregates
    check_aggregation(config.aggregation, config.trim_fraction, per_round)
    if config.min_valid_replies < 0 or config.max_examples < 0 or not config.max_update_ratio >= 0 \
            or not (config.norm_multiple == 0 or config.norm_multiple >= 1):
        raise ValueError(f"min_valid_replies={config.min_valid_replies}, max_examples={config.max_examples}, "
                         f"max_update_ratio={config.max_update_ratio}, norm_multiple={config.norm_multiple}: each "
                         "must be >= 0 (0: the default rule; norm_multiple 0 or >= 1)")
    check_privacy_options(config, per_round, averages_a_share=config.participation == "all" and config.fraction < 1)
    by = config.partition_by or private
    if by not in data.attributes:
        raise ValueError(f"partition_by={by!r}: dataset {data.name!r} has no such attribute; expected one of "
                         f"{sorted(data.attributes)}")


@dataclass
class LocalSettings:
    phase: str
    lam: float
    privacy_bound: str
    local_epochs: int
    batch_size: int
    lr: float

    @classmethod
    def from_config(cls, config) -> "LocalSettings":
        settings = cls(phase=str(config["phase"]), lam=float(config["lam"]), privacy_bound=str(config["privacy-bound"]),
                       local_epochs=int(config["local-epochs"]), batch_size=int(config["batch-size"]),
                       lr=float(config["lr"]))
        if settings.phase not in PHASES or settings.privacy_bound not in BOUNDS:
            raise ValueError(f"phase {settings.phase!r} / privacy bound {settings.privacy_bound!r}; expected one of "
                             f"{PHASES} / {BOUNDS}")
        return settings
