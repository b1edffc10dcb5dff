"""Flower's SecAgg+ as an option of the federated mechanisms: the securely aggregated model is the plain
FedAvg model within SecAgg+'s quantization, the server never receives one device's arrays, a SecAgg+ round
is checked as a whole, and the settings it cannot honour are refused with one clear error. The
deployment test trains pass-federated with SecAgg+ over TLS with authenticated SuperNodes (processes on
127.0.0.1) and an unregistered node refused."""
from __future__ import annotations

import numpy as np
import pytest

from sensorveil.sdk import federated
from tests.federated_inprocess import run_rounds

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")
SECURE = {"clipping_range": 8.0, "max_weight": 30.0}
NODES = [{"partition-id": i} for i in range(3)]


@pytest.mark.trains
def test_the_secure_aggregate_equals_the_plain_fedavg_aggregate_and_no_update_reaches_the_server_in_clear():
    plain, _, _ = run_rounds(NODES, rounds=2)
    secure, grid, reports = run_rounds(NODES, rounds=2, secure_aggregation=SECURE)
    for name in plain:
        # SecAgg+ quantizes [-8, 8] into 2**22 levels: a few 1e-6 of error, never more than 1e-4
        np.testing.assert_allclose(secure[name], plain[name], atol=1e-4)
        assert not np.allclose(plain[name], federated_initial(name))   # the rounds did move the model
    assert [(stage, rnd, devices) for stage, rnd, _, _, devices, _ in reports] == [("train", 1, 3), ("train", 2, 3)]
    assert grid.received and all(sum(len(record) for record in reply.content.array_records.values()) == 0
                                 for reply in grid.received)


def federated_initial(name: str):
    from tests.federated_inprocess import MODEL
    return MODEL[name]


@pytest.mark.trains
def test_a_secure_aggregate_that_moves_the_model_too_far_fails_the_round():
    hostile = [*NODES[:2], {"partition-id": 2, "scale": 1e4}]
    with pytest.raises(federated.FederationError, match=r"round 1 \(train\): the securely aggregated model fails "
                                                        r"its check: .*max_update_ratio=2"):
        run_rounds(hostile, rounds=1, secure_aggregation={**SECURE, "clipping_range": 1e6},
                   limits=federated.UpdateLimits(max_update_ratio=2.0))


@pytest.mark.parametrize("setting, message", [
    ({"aggregation": "fedmedian"}, r"aggregation=.fedmedian. with secure_aggregation=true: .* expected "
                                   r"aggregation=fedavg"),
    ({"norm_multiple": 2.0}, r"norm_multiple=2.0 with secure_aggregation=true: .* expected norm_multiple=0"),
    ({"clients": 1}, r"clients=1 with secure_aggregation=true: .* expected 2 or more devices"),
    ({"secagg_clipping_range": 0.0}, r"secagg_clipping_range=0.0: expected a finite number > 0"),
    ({"dp_noise_multiplier": 1.0, "dp_clipping_norm": 1.0}, r"dp_noise_multiplier=1.0 with secure_aggregation=true"),
])
def test_pass_federated_refuses_what_secagg_cannot_honour_with_one_clear_error(setting, message):
    from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig, check_config
    config = PassFederatedConfig(**{"secure_aggregation": True, "norm_multiple": 0.0, **setting})
    with pytest.raises(ValueError, match=message):
        check_config(config)


def test_tappfl_refuses_secagg_where_the_server_would_average_a_share_of_the_trained_updates():
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.tappfl import TAPPFLConfig, check_config
    data = load_dataset("digits")
    with pytest.raises(ValueError, match=r"participation='all' with secure_aggregation=true: .* expected "
                                         r"participation=sampled or fraction=1"):
        check_config(TAPPFLConfig(secure_aggregation=True, norm_multiple=0.0, fraction=0.5), data, "lt5")
    check_config(TAPPFLConfig(secure_aggregation=True, norm_multiple=0.0, fraction=1.0), data, "lt5")


@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.trains
def test_pass_federated_trains_with_secagg_over_tls_and_an_unregistered_node_is_refused(tmp_path, monkeypatch):
    from sensorveil.cli import main
    from sensorveil.sdk.federated.certs import write_certificates, write_node_keys
    from sensorveil.sdk.runs import read_run
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    tls = write_certificates(tmp_path / "certs")
    keys = [private for private, _ in write_node_keys(tmp_path / "keys", ["node-0", "node-1", "node-2", "stranger"])]
    nodes = [f'partition-id={i} num-partitions=3 data-path="{tmp_path / "run" / "devices" / f"device-{i}"}"'
             for i in range(3)]
    settings = {"clients": 3, "rounds": 2, "local_epochs": 1, "substitutes": 128, "embedding_dim": 32,
                "progress": False, "secure_aggregation": "true", "norm_multiple": 0}
    with federated.LoopbackFederation(home, nodes, tls=tls, node_keys=keys[:3]) as federation:
        stranger = federation.start_node("stranger", "partition-id=0 num-partitions=3", keys[3], retries=1)
        assert main(["train", "pass-federated", "--dataset", "digits", "--useful", "parity", "--private", "lt5",
                     "--out", str(tmp_path / "run"), "--attacker-epochs", "1", "--set", "federation=deployment",
                     f"superlink={federation.name}", "timeout_s=240", "round_timeout_s=90",
                     *[f"{k}={v}" for k, v in settings.items()]]) == 0
        assert stranger.wait(timeout=60) != 0
    assert "No SuperNode found with the given public key" in (home / "superlink.log").read_text()
    run = read_run(tmp_path / "run")
    assert run["federation"]["secure_aggregation"] is True
    assert [(r["round"], r["devices"], r["dropped"]) for r in run["federation"]["rounds"]] == [(1, 3, []), (2, 3, [])]
    assert "Secure aggregation completed" in (tmp_path / "run" / "flwr-run.log").read_text()
