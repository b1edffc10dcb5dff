"""pass-federated's settings: PASS's own (PASSConfig: tau, bank, lambda, mu, AdamW) and the federation's."""
from __future__ import annotations

from dataclasses import dataclass

from sensorveil.sdk.federated.privacy_options import PrivacyOptions, check_privacy_options
from sensorveil.sdk.mechanisms.pass_federated_parts.bank import BANK_SOURCES
from sensorveil.sdk.mechanisms.pass_parts.config import PASSConfig

FEDERATIONS = ("simulation", "deployment")
PARTITIONS = ("iid", "dirichlet", "groups")


@dataclass
class PassFederatedConfig(PASSConfig, PrivacyOptions):
    """PASSConfig's fields keep their meaning, except the training length: rounds x local_epochs replaces
    ``epochs`` (--epochs sets ``rounds``), and f starts from a seeded initialisation (no pre-training).
    PrivacyOptions adds Flower's SecAgg+ and differential privacy (sdk/federated/privacy_options.py)."""
    clients: int = 4                  # devices; the training split is partitioned over them
    rounds: int = 15                  # federated rounds; every device trains every round
    local_epochs: int = 10            # passes of PASS's mini-batch steps over a device's own rows a round
    partition: str = "iid"            # "iid", "dirichlet" (non-IID) or "groups" (one device per value)
    alpha: float = 0.5                # Dirichlet concentration
    partition_by: str = ""            # the attribute dirichlet skews or groups splits (UJI: user, phone); "":
    # the first private attribute
    aggregation: str = "fedavg"       # "fedavg", "fedmedian" or "fedtrimmedavg" (sdk/federated/strategy.py)
    trim_fraction: float = 0.2        # fedtrimmedavg: share cut from each tail
    min_valid_replies: int = 0        # a round with fewer valid updates fails; 0: more than half the devices
    max_examples: int = 0             # largest "num-examples" a device may claim; 0: the largest partition
    max_update_ratio: float = 100.0   # drop an update moving f, g by more than this times their norm; 0: off
    norm_multiple: float = 2.0        # drop an update moving the model by more than this times the round's
    # median update (federated.validation); 0: off
    federation: str = "simulation"    # "simulation" (run_simulation) or "deployment" (flwr run)
    superlink: str = ""               # deployment: a SuperLink connection of $FLWR_HOME/config.toml
    timeout_s: float = 3600.0         # wall-clock limit of the whole federation
    round_timeout_s: float = 600.0    # a device that has not replied by then fails the round
    cpus: int = 2                     # simulation: ClientApps run in parallel (one per CPU)
    bank_source: str = "auto"         # the bank's rows (bank.py): "declared" (the dataset's bank rows),
    # "server-split" (a share of the training split the server holds and no device is given), "auto" (declared
    # when the dataset has them, else server-split)
    server_share: float = 0.2         # server-split: the share of the training split the server holds


def check_config(config: PassFederatedConfig) -> None:
    """One clear error before any Flower process starts."""
    if config.epochs is not None:
        raise ValueError(f"epochs={config.epochs}: pass-federated trains rounds x local_epochs; set rounds= and "
                         "local_epochs= instead")
    if config.pretrain_epochs not in (None, 0):
        raise ValueError(f"pretrain_epochs={config.pretrain_epochs}: pass-federated has no federated "
                         "pre-training of f; expected 0")
    if config.clients < 1 or config.rounds < 1 or config.local_epochs < 1 or config.batch_size < 1:
        raise ValueError("clients, rounds, local_epochs and batch_size must each be >= 1")
    if config.partition not in PARTITIONS:
        raise ValueError(f"partition={config.partition!r}; expected one of {PARTITIONS}")
    if config.federation not in FEDERATIONS:
        raise ValueError(f"federation={config.federation!r}; expected one of {FEDERATIONS}")
    if config.federation == "deployment" and not config.superlink:
        raise ValueError("federation=deployment needs superlink=NAME, a SuperLink connection in "
                         "$FLWR_HOME/config.toml")
    if config.bank_source not in BANK_SOURCES or not 0.0 < config.server_share < 1.0:
        raise ValueError(f"bank_source={config.bank_source!r}, server_share={config.server_share}: expected "
                         f"bank_source in {BANK_SOURCES} and server_share in (0, 1)")
    from sensorveil.sdk.federated.strategy import check_aggregation
    check_aggregation(config.aggregation, config.trim_fraction, config.clients)   # every device every round
    if config.min_valid_replies < 0 or config.max_examples < 0 or not config.max_update_ratio >= 0 \
            or not (config.norm_multiple == 0 or config.norm_multiple >= 1):
        raise ValueError(f"min_valid_replies={config.min_valid_replies}, max_examples={config.max_examples}, "
                         f"max_update_ratio={config.max_update_ratio}, norm_multiple={config.norm_multiple}: each "
                         "must be >= 0 (0: the default rule; norm_multiple 0 or >= 1)")
    check_privacy_options(config, config.clients)
