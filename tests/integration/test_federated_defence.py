"""A federation that survives a bad device: real Flower simulations (the runtime test_tappfl uses) in
which some devices send NaN, inf, huge, wrong-shaped, wrong-typed or (1,)-shaped arrays, or lie about
their number of examples. Each is dropped and named, and the global model is the aggregate of the
honest devices; too few valid updates fail the round with one error; FedMedian and FedTrimmedAvg hold
against an outlier that FedAvg would follow.

The bad devices come from ``hostile_apps``, a factory handed to ``federated.simulate`` from Python
only: the mechanism's own factory never reads the spec's "tamper" entry, so no bundle, run config or
CLI setting can turn a device hostile."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sensorveil.sdk import federated
from sensorveil.sdk.mechanisms import tappfl

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

HOSTILE_APPS = "tests.integration.test_federated_defence:hostile_apps"
SEND_KINDS = ("nan", "inf", "huge", "shape", "scalar", "dtype", "count", "outlier")


def tampered(kind: str, arrays: dict, count: int) -> tuple[dict, int]:
    """What a hostile device sends instead of its honest update."""
    arrays = dict(arrays)
    first, last = next(iter(arrays)), list(arrays)[-1]
    if kind == "nan":
        arrays = {k: np.full_like(v, np.nan) for k, v in arrays.items()}
    elif kind == "inf":
        arrays[first] = arrays[first].copy()
        arrays[first].flat[0] = np.inf
    elif kind == "huge":
        arrays = {k: np.full_like(v, 1e30) for k, v in arrays.items()}
    elif kind == "outlier":
        arrays = {k: np.full_like(v, 1e3) for k, v in arrays.items()}
    elif kind == "shape":
        arrays[first] = np.ascontiguousarray(arrays[first][:, :-1])
    elif kind == "scalar":
        arrays[last] = np.zeros((1,), dtype=arrays[last].dtype)
    elif kind == "dtype":
        arrays[first] = arrays[first].astype(np.float64)
    elif kind == "count":
        count = 10**12
    else:
        raise ValueError(f"unknown tamper kind {kind!r}; expected one of {SEND_KINDS}")
    return arrays, count


def hostile_apps(spec: dict):
    """The mechanism's ServerApp and a ClientApp whose devices named in spec["tamper"] (partition id ->
    kind) send a tampered update. Every device writes what it sent to out_dir/sent/ for the test."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    server, _ = tappfl.simulation_apps(spec)
    client, tamper = ClientApp(), {int(k): v for k, v in spec["tamper"].items()}
    sent_dir = Path(spec["out_dir"]) / "sent"

    @client.train()
    def train(msg, context):
        reply = tappfl.device_train(msg, context)
        partition = int(context.node_config["partition-id"])
        arrays = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        metrics = dict(reply.content["metrics"])
        if partition in tamper:
            arrays, metrics["num-examples"] = tampered(tamper[partition], arrays, metrics["num-examples"])
        sent_dir.mkdir(exist_ok=True)
        round_ = int(msg.content["config"]["server-round"])
        np.savez(sent_dir / f"r{round_}-p{partition}-n{context.node_id}.npz", **arrays,
                 __count=np.array(metrics["num-examples"], dtype=np.float64))
        content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}),
                              "metrics": MetricRecord(metrics)})
        return Message(content=content, reply_to=msg)

    client.evaluate()(tappfl.device_evaluate)
    return server, client


def spec_for(out: Path, tamper: dict, **settings) -> dict:
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.rundir import base_record, dataset_record
    data = load_dataset("digits")
    base = base_record("tappfl", data, dataset_record("digits", None, None), "parity", "lt5", 0)
    config = tappfl.TAPPFLConfig(**{"fraction": 1.0, "rounds": 1, "pretrain_rounds": 0, "local_epochs": 1,
                                    "evaluate_fraction": 0.0, "reference_attacks": False, **settings})
    spec = tappfl.federation_spec(data, base, "parity", "lt5", config, out)
    spec["tamper"] = {str(k): v for k, v in tamper.items()}
    return spec


def simulate(tmp_path: Path, tamper: dict, **settings) -> tuple[dict, dict]:
    """Run one hostile simulation; (what each device sent by partition id, the round history)."""
    federated.simulate(HOSTILE_APPS, spec_for(tmp_path, tamper, **settings), tmp_path, timeout_s=300,
                       flwr_home=tmp_path / "flwr-home")
    return sent_updates(tmp_path), json.loads((tmp_path / tappfl.HISTORY_FILE).read_text())


def sent_updates(out: Path) -> dict:
    """partition id -> (node id, arrays, num-examples) of round 1."""
    sent = {}
    for path in (out / "sent").glob("r1-p*-n*.npz"):
        partition, node = map(int, re.fullmatch(r"r1-p(\d+)-n(\d+)\.npz", path.name).groups())
        with np.load(path) as saved:
            arrays = {k: saved[k] for k in saved.files if k != "__count"}
            sent[partition] = (node, arrays, float(saved["__count"]))
    return sent


def final_model(out: Path) -> dict:
    return {k: v.numpy() for k, v in torch.load(out / tappfl.FEATURE_FILE, weights_only=True).items()}


EXPECTED_REASON = {"nan": r"non-finite values", "inf": r"holds 1 non-finite",
                   "huge": r"moves the model by 1\.\d+e\+3\d",
                   "shape": r"is float32\[64, 63\], expected float32\[64, 64\]",
                   "scalar": r"is float32\[1\], expected float32\[16\]",
                   "dtype": r"is float64\[64, 64\], expected float32\[64, 64\]",
                   "count": r"num-examples=1e\+12 outside \[1, \d+\]"}


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_every_bad_update_is_dropped_and_named_and_the_model_is_the_honest_average(tmp_path):
    """15 devices, 7 hostile (one of each kind), 8 honest: more than half, so the round goes on."""
    kinds = list(EXPECTED_REASON)
    sent, history = simulate(tmp_path, dict(enumerate(kinds)), clients=15)
    [entry] = history
    assert entry["devices"] == 8 and len(sent) == 15
    named = {d["node"]: d["reason"] for d in entry["dropped"]}
    assert set(named) == {sent[p][0] for p in range(len(kinds))}
    for partition, kind in enumerate(kinds):
        assert re.search(EXPECTED_REASON[kind], named[sent[partition][0]]), (kind, named[sent[partition][0]])
    log = (tmp_path / federated.SIMULATION_LOG).read_text()   # the simulation's output, in the run dir
    for node in named:
        assert f"dropped the update of node {node}:" in log
    honest = [sent[p] for p in range(len(kinds), 15)]
    total = sum(count for _, _, count in honest)
    model = final_model(tmp_path)
    for key, value in model.items():
        expected = sum(arrays[key].astype(np.float64) * count for _, arrays, count in honest) / total
        assert np.isfinite(value).all()
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_too_few_valid_updates_fail_the_round_with_one_error_naming_the_devices(tmp_path):
    with pytest.raises(federated.FederationError, match="exited with code") as caught:
        simulate(tmp_path, {0: "nan", 1: "count"}, clients=3)
    sent = sent_updates(tmp_path)
    message = str(caught.value)    # the strategy's one line, pulled out of the simulation's log
    assert "\n" not in message and message.endswith(f"log: {tmp_path / 'simulation.log'})")
    assert "round 1 (train): only 1 of 3 device updates are valid, fewer than min_valid_replies=2; dropped 2" in message
    assert f"node {sent[0][0]}: array" in message and "non-finite" in message
    assert f"node {sent[1][0]}: num-examples=1e+12 outside" in message
    assert not (tmp_path / tappfl.FEATURE_FILE).exists()


@pytest.mark.simulation
@pytest.mark.parametrize("aggregation", ["fedmedian", "fedtrimmedavg"])
@pytest.mark.boots
@pytest.mark.trains
def test_robust_aggregation_holds_against_an_outlier_fedavg_would_follow(tmp_path, aggregation):
    """One device of five sends 1e3 everywhere: finite, well shaped, honest-looking count. With the norm
    bounds off it reaches the aggregation, where the median (or the 20% trimmed mean) ignores it."""
    from flwr.serverapp.strategy.fedtrimmedavg import trim_mean
    sent, [entry] = simulate(tmp_path, {0: "outlier"}, clients=5, aggregation=aggregation, trim_fraction=0.2,
                             max_update_ratio=0.0, norm_multiple=0.0)
    assert entry["devices"] == 5 and entry["dropped"] == []
    model = final_model(tmp_path)
    for key, value in model.items():
        stacked = np.stack([sent[p][1][key] for p in range(5)])
        robust = np.median(stacked, axis=0) if aggregation == "fedmedian" else trim_mean(stacked, 0.2)
        np.testing.assert_allclose(value, robust, rtol=1e-6, atol=1e-7)
        honest = stacked[1:]
        assert (value >= honest.min(0) - 1e-6).all() and (value <= honest.max(0) + 1e-6).all()
    assert max(float(np.abs(v).max()) for v in model.values()) < 10.0     # FedAvg would sit near 200


def test_the_aggregation_setting_is_checked_with_one_clear_error():
    from sensorveil.sdk.datasets import load_dataset
    data = load_dataset("digits")
    with pytest.raises(ValueError, match=r"aggregation='krum'; expected one of fedavg, fedmedian, fedtrimmedavg"):
        tappfl.check_config(tappfl.TAPPFLConfig(aggregation="krum"), data, "lt5")
    with pytest.raises(ValueError, match=r"trim_fraction=0\.5: .* \[0, 0\.5\)"):
        tappfl.check_config(tappfl.TAPPFLConfig(aggregation="fedtrimmedavg", trim_fraction=0.5), data, "lt5")
    assert tappfl.TAPPFLConfig().aggregation == "fedavg"


def test_the_strategies_are_flowers_own():
    from flwr.serverapp.strategy import FedAvg, FedMedian, FedTrimmedAvg

    from sensorveil.sdk.federated.strategy import strategy_class
    assert issubclass(strategy_class("fedavg"), FedAvg) and strategy_class() is federated.strict_fedavg_class()
    assert issubclass(strategy_class("fedmedian"), FedMedian)
    trimmed = strategy_class("fedtrimmedavg")(beta=0.1)
    assert isinstance(trimmed, FedTrimmedAvg) and trimmed.beta == 0.1


def test_a_failed_run_is_read_as_one_line_out_of_flowers_log():
    """The reason Flower gives for a device that raised, in deployment and in simulation (Ray's traceback
    around Flower's ClientAppException), reads "Type: message"; a log's failure is the strategy's line."""
    assert federated.client_reason("<class 'FileNotFoundError'>:<'/d/rows.npz not found'>") == \
        "FileNotFoundError: /d/rows.npz not found"
    ray = ("<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'ray::ClientAppActor.run() (pid=1)\n"
           "  File \"x.py\", line 2, in f\n    raise FileNotFoundError(p)\n"
           "FileNotFoundError: npz file not found: /m.npz\n"
           "\nThe above exception was the direct cause of the following exception:\n\n"
           "flwr.clientapp.client_app.ClientAppException: Exception ClientAppException occurred. Message: x'>")
    assert federated.client_reason(ray) == "FileNotFoundError: npz file not found: /m.npz"
    log = ("\x1b[91mERROR \x1b[0m:     ServerApp raised an exception\nTraceback (most recent call last):\n"
           "  File \"s.py\", line 9, in g\n    raise FederationError(text)\n"
           "sensorveil.sdk.federated.validation.FederationError: round 1 (train): 1 of 3 devices failed: node 7: "
           "OSError: unreadable\n\x1b[91mERROR \x1b[0m:     Exit Code: 201\n")
    assert federated.failure_line(log) == "round 1 (train): 1 of 3 devices failed: node 7: OSError: unreadable"
    assert federated.failure_line("Traceback\nKeyError: 'spec'\n") == "KeyError: 'spec'"
    assert federated.failure_line("all went well\n") is None
