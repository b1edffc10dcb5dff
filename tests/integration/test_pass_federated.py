"""pass-federated: PASS's f and g trained on Flower (real simulations, tiny settings). A run records a
round history in which every device replied every round, writes central PASS's files so its ONNX
export loads in the runtime and privatizes a batch, and an update carrying NaN is dropped and its
device named, the model being the mean of the honest updates. Each device's rows lie in a folder of
its own and a node opens no other (checked with an audit hook on every file the node process opens);
the bank comes from rows no device holds, and the run and the manifest say where.

The hostile device comes from ``hostile_apps``, a factory handed to ``federated.simulate`` from
Python only (as in test_federated_defence): the mechanism's own factory never reads "tamper"."""
from __future__ import annotations

import json
import os
import re
import sys
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
from sensorveil.sdk.mechanisms.pass_federated_parts.federation import federated_data, prepare_federation
from sensorveil.sdk.mechanisms.pass_parts.bundle import WEIGHTS_FILE

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

HOSTILE_APPS = "tests.integration.test_pass_federated:hostile_apps"
AUDITED_APPS = "tests.integration.test_pass_federated:audited_apps"
TINY = {"clients": 3, "rounds": 2, "local_epochs": 1, "substitutes": 128, "embedding_dim": 32, "progress": False}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    root = tmp_path_factory.mktemp("pass-federated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLWR_HOME", str(root / "flwr-home"))
        return train_run("pass-federated", "digits", useful="parity", private="lt5", out=root / "run",
                         attacker_epochs=1, settings=dict(TINY))


@pytest.mark.simulation
@pytest.mark.trains
def test_every_device_replies_every_round_and_the_run_is_scored_as_central_pass(small_run):
    from sensorveil.sdk.runs import read_run
    run = read_run(small_run)
    rounds = run["federation"]["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    assert all(r["sampled"] == 3 and r["devices"] == 3 and r["dropped"] == [] for r in rounds)
    assert {"L_hat", "L_S", "L_U", "L_X"} <= set(rounds[-1]["train"])
    assert run["federation"]["partition"]["devices"] == 3 and run["federation"]["aggregation"] == "fedavg"
    assert run["kind"] == "substitution" and run["substitution"]["bank_size"] == 128
    origin = run["substitution"]["bank_origin"]    # digits declares no bank rows: the server holds a split
    assert origin["source"] == "server-split" and origin["bank_size"] == 128 and origin["pool_rows"] >= 128
    rows = run["federation"]["partition"]["rows_per_device"]
    assert len(rows) == 3 and sum(rows) + origin["pool_rows"] == run["metrics"]["n_attacker_train"]
    assert not (small_run / "devices").exists()     # the simulated devices' folders end with the federation
    assert len(run["training"]["history"]) == 2
    for key in ("mnag", "probing_acc_private", "tree_acc_private", "random_star_lt5", "probing_acc_useful"):
        assert np.isfinite(run["metrics"][key]), key
    spec = json.loads((small_run / "federation-spec.json").read_text())
    initial = pf_server.initial_model(spec).state_dict()
    trained = torch.load(small_run / WEIGHTS_FILE, weights_only=True)
    assert set(trained) == set(initial) and not torch.equal(trained["g"], initial["g"])


@pytest.mark.simulation
@pytest.mark.exports
@pytest.mark.trains
def test_the_onnx_export_loads_in_the_runtime_and_privatizes_a_batch(small_run, tmp_path):
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    bundle = export_run(small_run, "onnx", tmp_path / "bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["mechanism"]["name"] == "pass-federated" and manifest["mechanism"]["kind"] == "substitution"
    assert manifest["mechanism"]["bank_origin"]["source"] == "server-split"
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


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_a_nan_update_is_dropped_and_named_and_the_model_is_the_honest_mean(tmp_path):
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.rundir import base_record, dataset_record
    data = load_dataset("digits")
    config = PassFederatedConfig(**{**TINY, "rounds": 1})
    base = base_record("pass-federated", data, dataset_record("digits", None, None), ["parity"], ["lt5"], 0)
    pdata, plan = federated_data(data, ["parity"], ["lt5"], [], config)
    spec = {**prepare_federation(pdata, plan, base, config, tmp_path)[0], "tamper": ["0"]}
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


def opened_files_stack() -> list:
    """Per device call in progress in this process, every path it opened: kept on ``sys`` and filled by one
    audit hook (sys.addaudithook) on the "open" events (io.open, os.open, np.load's open). On ``sys`` because
    Ray sends the ClientApp's functions to its workers by value, module globals included."""
    if not hasattr(sys, "_sensorveil_opened"):
        stack = sys._sensorveil_opened = []

        def record_open(event: str, args: tuple) -> None:
            if event == "open" and stack and isinstance(args[0], (str, bytes, os.PathLike)):
                stack[-1].append(os.fsdecode(args[0]))
        sys.addaudithook(record_open)
    return sys._sensorveil_opened


def audited_apps(spec: dict):
    """The mechanism's ServerApp and its own device_train, run under an audit hook that records every file
    the node's process opens during the call; each call's list goes to out_dir/opened/."""
    from flwr.clientapp import ClientApp
    server, _ = pf_server.simulation_apps(spec)
    client, out = ClientApp(), Path(spec["out_dir"]) / "opened"

    @client.train()
    def train(msg, context):
        stack = opened_files_stack()
        pf_client.device_data.cache_clear()    # every call reads as a freshly started node would
        stack.append([])
        try:
            reply = pf_client.device_train(msg, context)
        finally:
            opened = stack.pop()
        out.mkdir(exist_ok=True)
        name = f"r{msg.content['config']['server-round']}-p{context.node_config['partition-id']}-{os.getpid()}"
        (out / f"{name}.json").write_text(json.dumps(opened))
        return reply
    return server, client


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_each_node_opens_only_its_own_folder_and_the_bank_is_no_devices_row(tmp_path):
    """The trainer writes device-k/rows.npz for each device; in a real simulation each node's process opens
    that file and no other file of the run (no other device's folder) and no file of the dataset."""
    import sklearn.datasets

    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.rundir import base_record, dataset_record
    data = load_dataset("digits")
    config = PassFederatedConfig(**TINY)
    base = base_record("pass-federated", data, dataset_record("digits", None, None), ["parity"], ["lt5"], 0)
    pdata, plan = federated_data(data, ["parity"], ["lt5"], [], config)
    spec, parts = prepare_federation(pdata, plan, base, config, tmp_path)
    run_root, devices = tmp_path.resolve(), (tmp_path / "devices").resolve()
    assert sorted(p.name for p in devices.iterdir()) == ["device-0", "device-1", "device-2"]
    for k, rows in enumerate(parts):
        with np.load(devices / f"device-{k}" / "rows.npz") as saved:
            np.testing.assert_array_equal(saved["x"], pdata.x[rows].numpy())
    assert not set(np.concatenate(parts).tolist()) & set(plan.bank_rows.tolist())
    assert "dataset" not in spec["task"]      # nothing a node is sent names the data set
    home = tmp_path / "flwr-home"
    federated.simulate(AUDITED_APPS, spec, tmp_path, timeout_s=240, flwr_home=home)
    records = sorted((tmp_path / "opened").glob("r*-p*-*.json"))
    assert len(records) == 2 * 3                      # every device, every round
    dataset_files = Path(sklearn.datasets.__file__).resolve().parent / "data"
    for record in records:
        partition = int(re.search(r"-p(\d+)-", record.name).group(1))
        opened = [Path(p).resolve() for p in json.loads(record.read_text())]
        of_the_run = [p for p in opened if run_root in p.parents and home.resolve() not in p.parents]
        assert of_the_run == [devices / f"device-{partition}" / "rows.npz"], (record.name, of_the_run)
        assert not [p for p in opened if dataset_files in p.parents], record.name


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
@pytest.mark.trains
def test_deployment_over_loopback_superlink_and_supernodes(tmp_path, monkeypatch):
    """SuperLink + 2 SuperNodes on 127.0.0.1, `flwr run` through `sensorveil train pass-federated`; every
    process is stopped by id when the block ends."""
    from sensorveil.cli import main
    from sensorveil.sdk.runs import read_run
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    nodes = [f'partition-id={i} num-partitions=2 data-path="{tmp_path / "run" / "devices" / f"device-{i}"}"'
             for i in range(2)]
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


@pytest.mark.loopback
@pytest.mark.trains
def test_a_node_whose_data_folder_is_missing_fails_the_run_with_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """A real SuperNode given a data-path that does not exist: its ClientApp raises, the round fails, and
    `sensorveil train` exits 2 with one line on stderr naming that node (its SuperNode ID), the reason and
    the log file, instead of a traceback."""
    from sensorveil.cli import main
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    nodes = [f'partition-id=0 num-partitions=2 data-path="{tmp_path / "run" / "devices" / "device-0"}"',
             f'partition-id=1 num-partitions=2 data-path="{tmp_path / "missing"}"']
    with federated.LoopbackFederation(home, nodes) as federation:
        settings = [f"{k}={v}" for k, v in {**TINY, "clients": 2, "rounds": 1}.items()]
        code = main(["train", "pass-federated", "--dataset", "digits", "--useful", "parity", "--private", "lt5",
                     "--out", str(tmp_path / "run"), "--attacker-epochs", "1", "--set", "federation=deployment",
                     f"superlink={federation.name}", "timeout_s=150", "round_timeout_s=60", *settings])
    assert code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    node = re.search(r"SuperNode ID: (\d+)", (home / "supernode-1.log").read_text()).group(1)
    assert line.startswith(f"sensorveil train: error: round 1 (train): 1 of 2 devices failed: node {node}: "
                           f"FileNotFoundError: {tmp_path / 'missing' / 'rows.npz'} not found")
    assert line.endswith(f"log: {tmp_path / 'run' / 'flwr-run.log'})") and "Traceback" not in line
