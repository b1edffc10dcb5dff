"""PASS's settings (PASSConfig) and the per-dataset defaults of its training length."""
from __future__ import annotations

from dataclasses import asdict, dataclass

# Epochs per dataset that keep one training run to a few minutes on a 2-core CPU.
DEFAULT_EPOCHS = {"digits": 150, "ujiindoorloc": 10, "synthetic-depth": 40, "motionsense": 30,
                  "walkway": 30}
# Epochs of pre-training f as a classifier of the useful attributes before eq. 3 (PASSConfig.pretrain_epochs).
# The paper starts f from a pre-trained backbone (Table 6); from a random f, synthetic depth's P(X'|X)
# collapsed to one distribution for every input (L_S is at its minimum when every substitute is equally
# likely, and f never learned facing). Other datasets train from a random f
# (docs/decisions/0002-pass-pretraining.md; the figures with it: docs/pass_results.json).
DEFAULT_PRETRAIN = {"synthetic-depth": 4}


@dataclass
class PASSConfig:
    tau: float = 0.01                  # eq. 2 temperature (section 4.1: 0.01 for all experiments)
    substitutes: int = 4096            # |D_substitute| (section 5.1), capped at the training split's size
    embedding_dim: int = 512           # Table 6
    lam: float | None = None           # lambda of eq. 3; None -> N / M (section 5.1)
    mu: float | None = None            # mu of eq. 3; None -> 0.2 N (section 5.1)
    epochs: int | None = None          # None -> DEFAULT_EPOCHS for the dataset (else 50)
    pretrain_epochs: int | None = None # None -> DEFAULT_PRETRAIN for the dataset (else 0)
    batch_size: int = 256
    lr: float = 1e-3                   # Table 6: AdamW, lr 1e-3, weight decay 1e-4, cosine schedule
    weight_decay: float = 1e-4
    # an attribute the device itself measures for every sample (walkway: the tracker's walking
    # direction): the draw is restricted to bank entries sharing its value, in training and on the device
    condition: str | None = None
    # share of each training sample's entries above the sensor's floor set to the floor at every step (a
    # phone that hears fewer access points than the phones the bank came from); 0: off
    input_dropout: float = 0.0
    seed: int = 0
    progress: bool = True


def config_dict(config: PASSConfig) -> dict:
    return asdict(config)


def config_from_dict(values: dict) -> PASSConfig:
    return PASSConfig(**{k: v for k, v in values.items() if k in PASSConfig.__dataclass_fields__})
