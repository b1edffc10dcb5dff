"""Client-side differential privacy from Flower's own parts (DifferentialPrivacyClientSideFixedClipping on
the server, fixedclipping_mod on the devices): every update is clipped before it leaves its device, the
noise is on the aggregate, (epsilon, delta) is reported by an RDP accountant checked against the Gaussian
mechanism's closed form, and a value that would switch the protection off is refused with one error."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sensorveil.sdk.federated.accountant import epsilon_for, gaussian_rdp
from sensorveil.sdk.federated.differential_privacy import NOISE_METRIC, privacy_record
from tests.federated_inprocess import MODEL, run_rounds

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")


def test_the_accountant_matches_the_gaussian_mechanisms_closed_form():
    sigma, rounds, delta = 1.0, 10, 1e-5
    # at q = 1 RDP is T alpha / (2 sigma^2); its least epsilon over real alpha is
    # T / (2 sigma^2) + sqrt(2 T log(1/delta)) / sigma, which the grid of orders reaches within 0.01
    closed = rounds / (2 * sigma ** 2) + math.sqrt(2 * rounds * math.log(1 / delta)) / sigma
    epsilon, _ = epsilon_for([sigma] * rounds, delta)
    assert closed <= epsilon < closed + 0.01
    assert gaussian_rdp(2.0, 8, 1.0) == pytest.approx(8 / 8)
    assert gaussian_rdp(2.0, 8, 0.1) < gaussian_rdp(2.0, 8, 0.5) < gaussian_rdp(2.0, 8, 1.0)
    assert epsilon_for([2.0] * rounds, delta)[0] < epsilon   # more noise, less spent


@pytest.mark.parametrize("setting, message", [
    ({"dp_noise_multiplier": 0.0, "dp_clipping_norm": 1.0}, r"dp_noise_multiplier=0.0: expected a finite number > 0"),
    ({"dp_noise_multiplier": -1.0, "dp_clipping_norm": 1.0}, r"dp_noise_multiplier=-1.0: expected a finite number"),
    ({"dp_noise_multiplier": float("nan"), "dp_clipping_norm": 1.0}, r"dp_noise_multiplier=nan: expected"),
    ({"dp_noise_multiplier": 1.0, "dp_clipping_norm": 0.0}, r"dp_clipping_norm=0.0: expected a finite number > 0"),
    ({"dp_noise_multiplier": 1.0}, r"dp_clipping_norm=None: expected a finite number > 0 .*set both"),
    ({"dp_noise_multiplier": 1.0, "dp_clipping_norm": 1.0, "dp_delta": 0.0}, r"dp_delta=0.0: expected a number in"),
])
def test_a_dp_value_that_would_switch_privacy_off_is_refused_with_one_clear_error(setting, message):
    from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig, check_config
    with pytest.raises(ValueError, match=message):
        check_config(PassFederatedConfig(**setting))


@pytest.mark.trains
def test_the_cli_setting_reaches_the_same_refusal():
    from sensorveil.cli import main
    code = main(["train", "pass-federated", "--dataset", "digits", "--useful", "parity", "--private", "lt5",
                 "--set", "dp_noise_multiplier=0", "dp_clipping_norm=1"])
    assert code != 0


@pytest.mark.trains
def test_updates_are_clipped_on_the_device_noise_is_added_and_the_spend_is_recorded():
    noise, clip = 1e-3, 0.5
    nodes = [{"partition-id": 0}, {"partition-id": 1}, {"partition-id": 2, "scale": 1e4}]   # one huge update
    model, _, reports = run_rounds(nodes, rounds=2, differential_privacy={"noise_multiplier": noise,
                                                                          "clipping_norm": clip})
    moved = math.sqrt(sum(float(np.sum(np.square(model[k] - MODEL[k]))) for k in MODEL))
    # each round moves the model by the mean of three updates of norm <= clip, plus noise of std
    # noise * clip / 3 per value (16 values): two rounds stay well within 2 * clip
    assert moved <= 2 * clip + 16 * 5 * noise * clip
    rounds = [{"round": rnd, "train": metrics} for _, rnd, metrics, _, _, _ in reports]
    assert [r["train"][NOISE_METRIC] for r in rounds] == [noise, noise]
    record = privacy_record({"dp_noise_multiplier": noise, "dp_clipping_norm": clip, "dp_delta": 1e-5}, rounds)
    assert record["rounds_released"] == 2
    assert record["epsilon"] == round(epsilon_for([noise, noise], 1e-5)[0], 4)
