"""TAPPFL: the paper's bounds on variables whose mutual information is known, the direction
of Algorithm 1's update, partitions, a small federation in Flower's simulation runtime, failures that
must be loud, export through every format that runs here, the CLI, and one federation over loopback
with real SuperLink and SuperNode processes. Every Flower process gets its own FLWR_HOME."""
from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from sensorveil.sdk.mechanisms import tappfl
from sensorveil.sdk.mechanisms.tappfl import (
    DeviceNetworks,
    LocalSettings,
    UtilityCritic,
    jsd_mutual_information,
    privacy_condition_loss,
    privacy_network,
    theta_objective,
    vclub_upper_bound,
)
from sensorveil.sdk.rundir import read_run

pytest.importorskip("flwr", reason="Flower is the federated extra: pip install 'sensorveil[federated]'")

LOG2 = math.log(2.0)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The estimators' small networks run fastest on one thread; with the machine's 2 cores shared,
    two torch threads per test only contend."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
SMALL = {"clients": "4", "fraction": "0.5", "participation": "all", "rounds": "2", "pretrain_rounds": "1",
         "local_epochs": "1", "evaluate_fraction": "1.0", "timeout_s": "300", "reference_attacks": "false",
         "progress": "true"}


def binary_entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -(p * math.log(p) + (1 - p) * math.log(1 - p))


def binary_channel(n: int, flip: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """u ~ Bernoulli(1/2) and r = u flipped with probability ``flip``: I(r; u) = log 2 - H_b(flip)."""
    generator = torch.Generator().manual_seed(seed)
    u = torch.randint(0, 2, (n,), generator=generator)
    r = torch.where(torch.rand(n, generator=generator) < flip, 1 - u, u)
    return u, r


def onehot(values: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(values, 2).float()


def fitted_privacy_network(u, r, steps: int = 300) -> torch.nn.Module:
    """g_Psi trained by eq. 3 (the condition under eq. 2), with Adam to keep the test short."""
    torch.manual_seed(0)
    g = privacy_network(2, 2)
    optimizer = torch.optim.Adam(g.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        privacy_condition_loss(g(onehot(r)), u).backward()
        optimizer.step()
    return g.eval()


def club_with_true_posterior(flip: float) -> float:
    """Eq. 2 with q = the true posterior p(u|r) of the binary channel, in closed form."""
    if flip == 0.5:
        return 0.0
    return -binary_entropy(flip) - 0.5 * (math.log(1 - flip) + math.log(flip))


@pytest.mark.parametrize("flip", [0.5, 0.1, 0.25])
def test_vclub_with_the_true_posterior_matches_its_closed_form_and_bounds_the_mutual_information(flip):
    u, r = binary_channel(20000, flip, seed=1)
    posterior = torch.tensor([[1 - flip, flip], [flip, 1 - flip]])      # p(u | r), rows r
    estimate = float(vclub_upper_bound(torch.log(posterior[r]), u, torch.tensor([0.5, 0.5])))
    assert estimate == pytest.approx(club_with_true_posterior(flip), abs=0.02)
    assert estimate >= LOG2 - binary_entropy(flip) - 0.02


@pytest.mark.parametrize("flip", [0.5, 0.1, 0.0])
def test_vclub_with_g_trained_by_eq3_bounds_known_mutual_information(flip):
    """Independent (flip 1/2, I = 0), noisy (flip 0.1) and identical (flip 0, I = log 2) variables."""
    u, r = binary_channel(2000, flip, seed=2)
    g = fitted_privacy_network(u, r, steps=200)
    test_u, test_r = binary_channel(2000, flip, seed=3)
    with torch.no_grad():
        estimate = float(vclub_upper_bound(g(onehot(test_r)), test_u, torch.bincount(test_u).float() / len(test_u)))
    true_mi = LOG2 - binary_entropy(flip)
    assert estimate >= true_mi - 0.03, (estimate, true_mi)           # an upper bound (eq. 2)
    if flip == 0.5:
        assert abs(estimate) < 0.03                                    # nothing to bound
    elif flip == 0.1:
        assert estimate == pytest.approx(club_with_true_posterior(flip), abs=0.08)   # g reached p(u|r)


def jsd_closed_form(flip: float) -> float:
    """2 JSD(p(x, r) || p(x) p(r)) - 2 log 2, the supremum of the JSD estimate, for the binary channel."""
    joint = np.array([[0.5 * (1 - flip), 0.5 * flip], [0.5 * flip, 0.5 * (1 - flip)]])
    product = np.full((2, 2), 0.25)
    mixture = (joint + product) / 2
    kl = lambda p, q: float(np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / q), 0.0)))  # noqa: E731
    return 2 * (0.5 * kl(joint, mixture) + 0.5 * kl(product, mixture)) - 2 * LOG2


@pytest.mark.parametrize("flip", [0.5, 0.1, 0.0])
def test_jsd_estimate_approaches_its_known_value_from_below(flip):
    """x ~ Bernoulli(1/2), r = x through the channel, a single-valued u: the critic maximises the estimate of
    "Implementation in practice", whose top is 2 JSD - 2 log 2 (-2 log 2 when independent, 0 when identical)."""
    x, r = binary_channel(2000, flip, seed=4)
    u = torch.zeros_like(x)
    torch.manual_seed(0)
    h = UtilityCritic(2, 2, 1)
    optimizer = torch.optim.Adam(h.parameters(), lr=1e-2)
    for _ in range(200):
        optimizer.zero_grad()
        (-jsd_mutual_information(h, onehot(x), onehot(torch.roll(x, 1)), onehot(r), u)).backward()
        optimizer.step()
    test_x, test_r = binary_channel(2000, flip, seed=5)
    with torch.no_grad():
        estimate = float(jsd_mutual_information(h, onehot(test_x), onehot(torch.roll(test_x, 7)), onehot(test_r),
                                                torch.zeros_like(test_x)))
    target = jsd_closed_form(flip)
    assert estimate <= target + 0.03, (estimate, target)               # a lower bound
    assert estimate >= target - 0.06, (estimate, target)               # and the critic gets there


def test_theta_step_lowers_the_privacy_bound_at_lambda_1_and_raises_the_jsd_term_at_lambda_0():
    """Eq. 7's direction (Algorithm 1's line 18 would descend +CE, helping the adversary): one SGD step of
    f on theta_objective, with g and h fixed."""
    import copy
    start = DeviceNetworks.build({"input_dim": 8, "representation_dim": 4, "n_private": 2}, seed=0)
    x = torch.rand(64, 8, generator=torch.Generator().manual_seed(0))
    u = (x[:, 0] > 0.5).long()                       # the private attribute lives in x
    x_bar, prior = torch.roll(x, 1, 0), torch.tensor([0.5, 0.5])
    for lam, watched, direction in ((1.0, 1, -1), (0.0, 2, +1)):   # (loss, privacy, utility)
        nets = copy.deepcopy(start)
        settings = LocalSettings("tappfl", lam, "vclub", 1, 64, 0.05)
        before = theta_objective(nets, nets.f(x), x, x_bar, u, prior, settings)[watched]
        tappfl.sgd_step(torch.optim.SGD(nets.f.parameters(), lr=0.05),
                        theta_objective(nets, nets.f(x), x, x_bar, u, prior, settings)[0])
        after = theta_objective(nets, nets.f(x), x, x_bar, u, prior, settings)[watched]
        assert direction * (float(after) - float(before)) > 0, (lam, float(before), float(after))


def test_partitions_cover_the_rows_once_and_dirichlet_skews_with_small_alpha():
    from sensorveil.sdk.federated import partition_rows
    rows, labels = np.arange(1000), np.repeat(np.arange(5), 200)
    iid = partition_rows(rows, labels, 10, "iid", seed=3)
    assert sorted(np.concatenate(iid).tolist()) == rows.tolist() and {len(p) for p in iid} == {100}

    def classes_per_device(parts):
        return np.mean([len(np.unique(labels[p])) for p in parts])
    skewed = partition_rows(rows, labels, 10, "dirichlet", alpha=0.1, seed=3)
    mild = partition_rows(rows, labels, 10, "dirichlet", alpha=100.0, seed=3)
    assert sorted(np.concatenate(skewed).tolist()) == rows.tolist()
    assert classes_per_device(skewed) < classes_per_device(mild) and min(len(p) for p in skewed) >= 2
    assert all((a == b).all() for a, b in zip(skewed, partition_rows(rows, labels, 10, "dirichlet", 0.1, seed=3)))
    with pytest.raises(ValueError, match="cannot give 600 devices"):
        partition_rows(rows, labels, 600, "iid")


# -- a small federation in Flower's simulation runtime ------------------------------------------------
@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """4 devices, Algorithm 1's participation (all train, 2 averaged), 1 pre-training + 2 TAPPFL rounds."""
    from sensorveil.sdk.runs import train_run
    root = tmp_path_factory.mktemp("tappfl")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLWR_HOME", str(root / "flwr-home"))
        started = time.time()
        run_dir = train_run("tappfl", "digits", out=root / "run", attacker_epochs=2, settings=dict(SMALL))
        return run_dir, time.time() - started


@pytest.mark.simulation
@pytest.mark.trains
def test_small_federation_trains_f_only_and_reports_every_round(small_run):
    from sensorveil.sdk.runs import read_run
    run_dir, seconds = small_run
    run = read_run(run_dir)
    rounds = run["federation"]["rounds"]
    assert [(r["phase"], r["round"]) for r in rounds] == [("pretrain", 1), ("tappfl", 1), ("tappfl", 2)]
    assert all(r["devices"] == 2 for r in rounds)                     # 4 trained, half averaged
    assert all(r["evaluate"]["devices"] == 4 for r in rounds[1:])      # @app.evaluate on every device
    assert {"ce", "vclub", "jsd"} <= set(rounds[-1]["train"])
    assert {"attack_acc", "paper_inference_acc"} <= set(rounds[-1]["evaluate"])
    assert run["kind"] == "representation" and run["output"]["units"] == "representation"
    state = torch.load(run_dir / tappfl.FEATURE_FILE, weights_only=True)
    spec = json.loads((run_dir / "federation-spec.json").read_text())
    initial = tappfl.initial_feature_extractor(spec).state_dict()
    assert set(state) == set(initial) and any(not torch.equal(state[k], initial[k]) for k in state)
    metrics = run["metrics"]
    assert run["reference"]["random_guess_private"] == 0.5
    assert metrics["gap_private"] == pytest.approx(metrics["probing_acc_private"] - 0.5)
    print(f"small federation: {seconds:.1f} s")


@pytest.mark.simulation
@pytest.mark.trains
def test_participation_all_runs_device_update_on_every_device_every_round(small_run):
    """Algorithm 1 lines 3-5: every device counts its DeviceUpdates and reports the count to @app.evaluate,
    which all 4 devices answer. A count never exceeds the rounds so far, so a mean equal to the round
    number means every device trained in every round, although the server averaged only 2 of them."""
    from sensorveil.sdk.runs import read_run
    rounds = read_run(small_run[0])["federation"]["rounds"]
    for entry in rounds[1:]:
        assert entry["evaluate"]["devices"] == 4 and entry["devices"] == 2
        assert entry["evaluate"]["device_updates"] == pytest.approx(entry["round"])
        assert entry["train"]["device_updates"] == pytest.approx(entry["round"])


@pytest.mark.simulation
@pytest.mark.trains
def test_the_papers_inference_accuracy_is_recorded_on_held_out_rows(small_run):
    """run.json's metrics hold the paper's measure (each device's own g on rows it did not train on, mean
    over devices, end of training) beside the probing attackers' figures, and per round."""
    from sensorveil.sdk.runs import read_run
    run = read_run(small_run[0])
    metrics, rounds = run["metrics"], run["federation"]["rounds"]
    accuracy = metrics["paper_inference_accuracy"]
    assert 0.0 <= accuracy <= 1.0 and "probing_acc_private" in metrics and "tree_acc_private" in metrics
    assert accuracy == rounds[-1]["evaluate"]["paper_inference_acc"]
    assert metrics["paper_gap_private"] == pytest.approx(accuracy - 0.5) and metrics["paper_inference_devices"] == 4
    assert metrics["paper_inference_accuracy_by_round"] == [r["evaluate"]["paper_inference_acc"] for r in rounds[1:]]
    held = run["federation"]["partition"]["heldout"]
    assert held["share"] == 0.2 and held["min_per_device"] >= 59 and held["rows"] == pytest.approx(0.2 * 1198, abs=4)


def test_each_device_holds_out_rows_it_never_trains_on():
    config = tappfl.TAPPFLConfig(clients=4)
    from sensorveil.sdk.datasets import load_dataset
    data = load_dataset("digits")
    parts = tappfl.device_partitions(data, "parity", "lt5", config)
    for device, part in enumerate(parts):
        train, held = tappfl.heldout_split(part, config.heldout, config.seed, device)
        assert not set(train) & set(held) and sorted([*train, *held]) == sorted(part)
        assert len(held) == round(0.2 * len(part))
        assert (held == tappfl.heldout_split(part, config.heldout, config.seed, device)[1]).all()
    with pytest.raises(ValueError, match="fewer than 2 to train on"):
        tappfl.heldout_split(np.arange(2), 0.2, 0, 0)
    x, u = torch.rand(40, 8), torch.randint(0, 2, (40,))
    nets = DeviceNetworks.build({"input_dim": 8, "representation_dim": 4, "n_private": 2}, seed=0)
    assert 0.0 <= tappfl.paper_inference_accuracy(nets.f, nets.g, x, u) <= 1.0


def test_defaults_follow_algorithm_1_at_the_papers_rows_per_device():
    """Every device every round, rho = 10% averaged (Algorithm 1, setup), ~326 rows a device as the
    paper's Adult over 100 devices, so digits' 1,198 protocol training rows make 4 devices."""
    config = tappfl.TAPPFLConfig()
    assert (config.participation, config.fraction, config.evaluate_fraction, config.heldout) == ("all", 0.1, 1.0, 0.2)
    assert (config.rounds, config.local_epochs, config.batch_size, config.lr) == (20, 10, 10, 0.01)
    assert config.clients == tappfl.paper_scale_clients(1198) == 4
    assert tappfl.paper_scale_clients(32561) == 100


@pytest.mark.simulation
@pytest.mark.exports
@pytest.mark.trains
def test_representation_bundle_runs_in_every_local_format_and_matches_torch(small_run, tmp_path):
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    run_dir, _ = small_run
    f = tappfl.load_feature_extractor(run_dir, read_run(run_dir))
    x = load_dataset("digits").x[:20]
    with torch.no_grad():
        expected = f(torch.from_numpy(x / 16.0)[:, None]).numpy()
    for fmt in ("onnx", "openvino", "tflite"):
        bundle = export_run(run_dir, fmt, tmp_path / fmt)
        manifest = json.loads((bundle / "manifest.json").read_text())
        stage = manifest["pipeline"][0]
        assert len(manifest["pipeline"]) == 1 and {key: stage[key] for key in ("kind", "graph", "emits")} == \
            {"kind": "model", "graph": "model", "emits": "representation"}
        # a representation has no sensor units to map back to: the runtime keeps the units
        assert stage["units"] == "model" and "representation" in stage["units_note"]
        assert manifest["mechanism"]["kind"] == "representation"
        assert manifest["output"]["units"] == "representation" and manifest["output"]["sample_shape"] == [16]
        assert all(r["status"] == "passed" for r in manifest["validation"]), manifest["validation"]
        privatizer = Privatizer.load(bundle)
        assert privatizer.emits == "representation" and privatizer.takes == "model"
        np.testing.assert_allclose(privatizer(x), expected, atol=1e-4)
        assert privatizer(x[0]).shape == (16,)


@pytest.mark.simulation
@pytest.mark.exports
@pytest.mark.trains
def test_the_audit_attacks_the_representation_the_bundle_emits(small_run, tmp_path, capsys):
    """`sensorveil evaluate BUNDLE`: the audit's attackers learn from representations the runtime
    computed (onnxruntime, no torch in the loop) and agree with the attack on the trained f."""
    from sensorveil.cli import main
    from sensorveil.export import export_run
    from sensorveil.sdk.assess import evaluate_bundle
    from sensorveil.sdk.mechanisms import get
    from sensorveil.sdk.rundir import read_run
    run_dir, _ = small_run
    bundle = export_run(run_dir, "onnx", tmp_path / "bundle")
    assert main(["evaluate", str(bundle), "--seeds", "1", "--attacker-epochs", "1",
                 "--json", str(tmp_path / "b.json")]) == 0
    device = json.loads((tmp_path / "b.json").read_text())
    assert device["backend"] == "onnxruntime" and device["n_test"] == 599
    assert {"neural", "trees", "logistic"} <= set(device["private"])
    run = read_run(run_dir)
    from sensorveil.runtime import Privatizer
    on_device = get("tappfl").release(run_dir, run, Privatizer.load(bundle, backend="onnxruntime"))
    in_torch = get("tappfl").release(run_dir, run)
    assert on_device.train.shape == (1198, 16)
    np.testing.assert_allclose(on_device.test.numpy(), in_torch.test.numpy(), atol=1e-4)
    figures = evaluate_bundle(bundle, "onnxruntime", attacker_epochs=1)
    assert figures["emits"] == "representation" and figures["random_guess_private"] == 0.5
    assert "attacker (private attribute)" in capsys.readouterr().out


# -- failures must be loud ------------------------------------------------------------------------
def failing_spec(tmp_path: Path) -> dict:
    """A real spec whose devices cannot read their data (an npz that does not exist): every
    ClientApp raises FileNotFoundError."""
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.rundir import base_record, dataset_record
    data = load_dataset("digits")
    base = base_record("tappfl", data, dataset_record("digits", None, None), "parity", "lt5", 0)
    config = tappfl.TAPPFLConfig(clients=2, fraction=1.0, rounds=1, pretrain_rounds=0, local_epochs=1,
                                 evaluate_fraction=0.0)
    spec = tappfl.federation_spec(data, base, "parity", "lt5", config, tmp_path)
    spec["task"]["dataset"] = {"name": "npz", "path": str(tmp_path / "missing.npz"), "options": {}}
    return spec


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_a_clientapp_that_raises_fails_the_simulation_instead_of_hanging(tmp_path):
    from sensorveil.sdk import federated
    started = time.time()
    with pytest.raises(federated.FederationError, match="exited with code") as caught:
        federated.simulate(tappfl.SIMULATION_APPS, failing_spec(tmp_path), tmp_path, timeout_s=240,
                           flwr_home=tmp_path / "flwr-home")
    assert time.time() - started < 240
    # one line out of the simulation's log: the round, every failed node and its reason, and the log file
    message = str(caught.value)
    assert "\n" not in message and message.endswith(f"log: {tmp_path / federated.SIMULATION_LOG})")
    assert re.match(r"round 1 \(train\): 2 of 2 devices failed: node \d+: \w*Error: .*missing\.npz", message), message


@pytest.mark.simulation
@pytest.mark.boots
@pytest.mark.trains
def test_a_simulation_past_its_limit_is_stopped_by_pid_and_says_so(tmp_path):
    from sensorveil.sdk import federated
    with pytest.raises(federated.FederationTimeout, match=r"limit of 3 s and was stopped \(pid (\d+)\)") as caught:
        federated.simulate(tappfl.SIMULATION_APPS, failing_spec(tmp_path), tmp_path, timeout_s=3,
                           flwr_home=tmp_path / "flwr-home")
    pid = int(re.search(r"pid (\d+)", str(caught.value)).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- the Adult loader (no Adult file here: a few records in the real format) -----------------------------
ADULT_DATA = """39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K
38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Male, 0, 0, 40, United-States, <=50K
31, Private, 45781, Masters, 14, Never-married, Prof-specialty, Not-in-family, White, Female, 14084, 0, 50, United-States, >50K
54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, 0, 0, 60, South, >50K
"""  # noqa: E501  (records in the file's own format, one per line)
ADULT_TEST = """|1x3 Cross validator
25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.
38, Private, 89814, HS-grad, 9, Married-civ-spouse, Farming-fishing, Husband, White, Male, 0, 0, 50, United-States, <=50K.
44, Private, 160323, Some-college, 10, Married-civ-spouse, Machine-op-inspct, Husband, Black, Male, 7688, 0, 40, United-States, >50K.
"""  # noqa: E501  (records in the file's own format, one per line)


def test_adult_loader_reads_the_uci_format_from_a_user_given_folder(tmp_path):
    from sensorveil.sdk.datasets import load_dataset

    (tmp_path / "adult.data").write_text(ADULT_DATA)
    (tmp_path / "adult.test").write_text(ADULT_TEST)
    train = load_dataset("adult", tmp_path)
    assert train.x.shape == (5, 96) and train.x.dtype == np.float32 and 0 <= train.x.min() <= train.x.max() <= 1
    assert train.attributes["income"].tolist() == [0, 0, 0, 1, 1]
    assert train.attributes["gender"].tolist() == [1, 1, 1, 0, 1]
    assert train.attributes["marital_status"].tolist() == [4, 2, 0, 4, 2]  # appendix B's codes
    assert train.x[0, 0] == pytest.approx(0.39) and train.x[4, 6:14].sum() == 0  # age; "?" workclass
    both = load_dataset("adult", tmp_path, split="both")
    assert len(both) == 8 and both.attributes["income"][-1] == 1  # "<=50K." read as label
    with pytest.raises(FileNotFoundError, match="expected a folder or .zip"):
        load_dataset("adult", tmp_path / "nowhere")


# -- sampled participation stays an option ------------------------------------------------------------
@pytest.mark.simulation
@pytest.mark.trains
def test_sampled_participation_trains_only_rho_m_devices_a_round(tmp_path, monkeypatch):
    """participation="sampled" (Flower's FedAvg): 2 of 10 devices train in the round; all 10 answer
    @app.evaluate, and their DeviceUpdate counts average 2 / 10."""
    from sensorveil.sdk.runs import read_run, train_run

    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    settings = {"clients": "10", "participation": "sampled", "fraction": "0.2", "rounds": "1", "pretrain_rounds": "0",
                "local_epochs": "1", "reference_attacks": "false", "timeout_s": "300"}
    run = read_run(train_run("tappfl", "digits", out=tmp_path / "run", attacker_epochs=1, settings=settings))
    [only] = run["federation"]["rounds"]
    assert only["devices"] == 2 and only["evaluate"]["devices"] == 10
    assert only["evaluate"]["device_updates"] == pytest.approx(0.2, abs=0.01)
    assert 0.0 <= run["metrics"]["paper_inference_accuracy"] <= 1.0
    print(f"10 devices, 2 sampled, one round: {run['federation']['wall_seconds']} s")


# -- deployment over loopback -------------------------------------------------------------------------
def listening_addresses(pids: set) -> set:
    """(address, port) of every TCP socket in LISTEN state owned by ``pids`` or their descendants (Linux)."""
    family = set(pids)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) in family:
            family.add(int(stat.parent.name))
    inodes = set()
    for pid in family:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                address, port = parts[1].split(":")
                found.add((address, int(port, 16)))
    return found


@pytest.mark.loopback
@pytest.mark.trains
def test_federation_over_loopback_with_real_superlink_and_supernodes(tmp_path, monkeypatch):
    """SuperLink + 2 SuperNodes on 127.0.0.1, `flwr run` through `sensorveil train tappfl`; everything
    is stopped by process id when the block ends, within a bounded time."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads /proc to check the listening addresses (Linux)")
    from sensorveil.cli import main
    from sensorveil.sdk import federated
    from sensorveil.sdk.runs import read_run

    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    started = time.time()
    nodes = [f"partition-id={i} num-partitions=2" for i in range(2)]
    with federated.LoopbackFederation(home, nodes) as federation:
        addresses = listening_addresses({p.pid for p in federation.processes.values()})
        assert addresses and {a for a, _ in addresses} <= {"0100007F", "00000000000000000000000001000000"}, addresses
        assert (
            main(
                [
                    "train",
                    "tappfl",
                    "--dataset",
                    "digits",
                    "--out",
                    str(tmp_path / "run"),
                    "--set",
                    "federation=deployment",
                    f"superlink={federation.name}",
                    "clients=2",
                    "fraction=1.0",
                    "rounds=2",
                    "pretrain_rounds=0",
                    "local_epochs=1",
                    "evaluate_fraction=0",
                    "reference_attacks=false",
                    "timeout_s=180",
                    "round_timeout_s=120",
                ]
            )
            == 0
        )
        processes = dict(federation.processes)
    stopped = time.time()
    assert all(p.poll() is not None for p in processes.values())
    run = read_run(tmp_path / "run")
    assert run["federation"]["runtime"] == "deployment"
    assert [(r["round"], r["devices"]) for r in run["federation"]["rounds"]] == [(1, 2), (2, 2)]
    assert stopped - started < 300
    print(f"loopback federation: {stopped - started:.1f} s")
