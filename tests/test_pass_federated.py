"""pass-federated: PASS's f and g trained on Flower (real simulations, tiny settings). A run records a
round history in which every device replied every round, writes central PASS's files so its ONNX
export loads in the runtime and privatizes a batch, and an update carrying NaN is dropped and its
device named, the model being the mean of the honest updates.

The hostile device comes from ``hostile_apps``, a factory handed to ``federated.simulate`` from
Python only (as in test_federated_defence): the mechanism's own factory never reads "tamper"."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms import get
from sensorveil.sdk.mechanisms.base import TrainRequest
from sensorveil.sdk.mechanisms.pass_federated_parts import client as pf_client
from sensorveil.sdk.mechanisms.pass_federated_parts import server as pf_server
from sensorveil.sdk.mechanisms.pass_federated_parts.config import PassFederatedConfig, check_config
from sensorveil.sdk.mechanisms.pass_federated_parts.federation import federation_spec
from sensorveil.sdk.mechanisms.pass_parts.bundle import WEIGHTS_FILE
from sensorveil.sdk.mechanisms.pass_parts.data import prepare_data

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

HOSTILE_APPS = "tests.test_pass_federated:hostile_apps"
TINY = {"clients": 3, "rounds": 2, "local_epochs": 1, "substitutes": 128, "embedding_dim": 32, "progress": False}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    root = tmp_path_factory.mktemp("pass-federated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLWR_HOME", str(root / "flwr-home"))
        return train_run("pass-federated", "digits", useful="parity", private="lt5", out=root / "run",
                         attacker_epochs=1, settings=dict(TINY))


def test_every_device_replies_every_round_and_the_run_is_scored_as_central_pass(small_run):
    from sensorveil.sdk.runs import read_run
    run = read_run(small_run)
    rounds = run["federation"]["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    assert all(r["sampled"] == 3 and r["devices"] == 3 and r["dropped"] == [] for r in rounds)
    assert {"L_hat", "L_S", "L_U", "L_X"} <= set(rounds[-1]["train"])
    assert run["federation"]["partition"]["devices"] == 3 and run["federation"]["aggregation"] == "fedavg"
    assert run["kind"] == "substitution" and run["substitution"]["bank_size"] == 128
    assert len(run["training"]["history"]) == 2
    for key in ("mnag", "probing_acc_private", "tree_acc_private", "random_star_lt5", "probing_acc_useful"):
        assert np.isfinite(run["metrics"][key]), key
    spec = json.loads((small_run / "federation-spec.json").read_text())
    initial = pf_server.initial_model(spec).state_dict()
    trained = torch.load(small_run / WEIGHTS_FILE, weights_only=True)
    assert set(trained) == set(initial) and not torch.equal(trained["g"], initial["g"])


def test_the_onnx_export_loads_in_the_runtime_and_privatizes_a_batch(small_run, tmp_path):
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    bundle = export_run(small_run, "onnx", tmp_path / "bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["mechanism"]["name"] == "pass-federated" and manifest["mechanism"]["kind"] == "substitution"
    assert [stage["kind"] for stage in manifest["pipeline"]] == ["model", "substitution"]
    x = load_dataset("digits").x[:16]
    samples = Privatizer.load(bundle)(x)
    assert samples.shape == x.shape
    index = Privatizer.load(bundle, output="index")(x)
    assert index.shape == (16,) and ((0 <= index) & (index < 128)).all()


def hostile_apps(spec: dict):
    """The mechanism's ServerApp and a ClientApp whose devices named in spec["tamper"] send NaN weights;
    every device writes what it sent to out_dir/sent/."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    server, _ = pf_server.simulation_apps(spec)
    client, tamper = ClientApp(), {int(k) for k in spec["tamper"]}
    sent_dir = Path(spec["out_dir"]) / "sent"

    @client.train()
    def train(msg, context):
        reply = pf_client.device_train(msg, context)
        partition = int(context.node_config["partition-id"])
        arrays = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        if partition in tamper:
            arrays = {k: np.full_like(v, np.nan) for k, v in arrays.items()}
        metrics = dict(reply.content["metrics"])
        sent_dir.mkdir(exist_ok=True)
        np.savez(sent_dir / f"p{partition}-n{context.node_id}.npz", **arrays,
                 __count=np.array(metrics["num-examples"], dtype=np.float64))
        return Message(content=RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}),
                                           "metrics": MetricRecord(metrics)}), reply_to=msg)
    return server, client


def test_a_nan_update_is_dropped_and_named_and_the_model_is_the_honest_mean(tmp_path):
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.rundir import base_record, dataset_record
    data = load_dataset("digits")
    config = PassFederatedConfig(**{**TINY, "rounds": 1})
    base = base_record("pass-federated", data, dataset_record("digits", None, None), ["parity"], ["lt5"], 0)
    pdata = prepare_data(data, ["parity"], ["lt5"], [], config.substitutes, config.seed)
    spec = {**federation_spec(pdata, base, config, tmp_path), "tamper": ["0"]}
    federated.simulate(HOSTILE_APPS, spec, tmp_path, timeout_s=240, flwr_home=tmp_path / "flwr-home")
    [entry] = json.loads((tmp_path / pf_server.HISTORY_FILE).read_text())
    sent = {}
    for path in (tmp_path / "sent").glob("p*-n*.npz"):
        partition, node = map(int, re.fullmatch(r"p(\d+)-n(\d+)\.npz", path.name).groups())
        with np.load(path) as saved:
            sent[partition] = (node, {k: saved[k] for k in saved.files if k != "__count"}, float(saved["__count"]))
    assert sorted(sent) == [0, 1, 2] and entry["sampled"] == 3 and entry["devices"] == 2
    [dropped] = entry["dropped"]
    assert dropped["node"] == sent[0][0] and "non-finite values" in dropped["reason"]
    honest = [sent[1], sent[2]]
    total = sum(count for _, _, count in honest)
    model = torch.load(tmp_path / WEIGHTS_FILE, weights_only=True)
    for key, value in model.items():
        expected = sum(arrays[key].astype(np.float64) * count for _, arrays, count in honest) / total
        np.testing.assert_allclose(value.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_the_groups_partition_gives_each_value_its_own_device():
    """partition=groups (e.g. partition_by=user on UJIIndoorLoc): one device per user, their rows only."""
    from sensorveil.sdk.federated import partition_rows
    rows, users = np.arange(10, 22), np.array([3, 3, 3, 7, 7, 7, 7, 9, 9, 9, 9, 9])
    parts = partition_rows(rows, users, 3, "groups")
    assert [part.tolist() for part in parts] == [[10, 11, 12], [13, 14, 15, 16], [17, 18, 19, 20, 21]]
    with pytest.raises(ValueError, match="expected clients=3, got 4"):
        partition_rows(rows, users, 4, "groups")
    with pytest.raises(ValueError, match=r"values \[3\] hold fewer than 4 rows"):
        partition_rows(rows, users, 3, "groups", min_size=4)


def test_settings_are_checked_before_any_flower_process_starts(tmp_path):
    mechanism = get("pass-federated")
    request = TrainRequest(data=None, useful=["parity"], private=["lt5"], out=tmp_path, base={},
                           settings={"aggregation": "fedmedian", "clients": "5"}, epochs=3)
    config = mechanism.make_config(request)
    assert (config.aggregation, config.clients, config.rounds) == ("fedmedian", 5, 3)
    check_config(config)
    for bad, message in (({"aggregation": "krum"}, "aggregation='krum'"), ({"epochs": 5}, "rounds x local_epochs"),
                         ({"pretrain_epochs": 2}, "no federated pre-training"), ({"partition": "by-user"}, "partition"),
                         ({"federation": "deployment"}, "superlink")):
        with pytest.raises(ValueError, match=re.escape(message)):
            check_config(PassFederatedConfig(**bad))


@pytest.mark.loopback
def test_deployment_over_loopback_superlink_and_supernodes(tmp_path, monkeypatch):
    """SuperLink + 2 SuperNodes on 127.0.0.1, `flwr run` through `sensorveil train pass-federated`; every
    process is stopped by id when the block ends."""
    from sensorveil.cli import main
    from sensorveil.sdk.runs import read_run
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    nodes = [f"partition-id={i} num-partitions=2" for i in range(2)]
    with federated.LoopbackFederation(home, nodes) as federation:
        settings = [f"{k}={v}" for k, v in {**TINY, "clients": 2}.items()]
        assert main(["train", "pass-federated", "--dataset", "digits", "--useful", "parity", "--private", "lt5",
                     "--out", str(tmp_path / "run"), "--attacker-epochs", "1", "--set", "federation=deployment",
                     f"superlink={federation.name}", "timeout_s=180", "round_timeout_s=120", *settings]) == 0
        processes = dict(federation.processes)
    assert all(p.poll() is not None for p in processes.values())
    run = read_run(tmp_path / "run")
    assert run["federation"]["runtime"] == "deployment"
    assert [(r["round"], r["sampled"], r["devices"], r["dropped"]) for r in run["federation"]["rounds"]] == \
        [(1, 2, 2, []), (2, 2, 2, [])]
