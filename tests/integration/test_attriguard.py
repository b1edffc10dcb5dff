"""AttriGuard: PANDA (Algorithm 1) and its policies, the KKT mechanism (eq. 7-10) against a generic
convex solver, and the mechanism trained, exported to every format and run by the runtime."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime.stages.attriguard import draw, kkt_mechanism, panda, phase_one
from sensorveil.sdk.rundir import read_run


def small_lr(seed=0, classes=4, dim=30):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, (classes, dim)).astype(np.float32), rng.normal(0, 0.5, classes).astype(np.float32)


def decide_with(weights, bias):
    return lambda flat: (flat @ weights.T + bias).argmax(axis=1)


@pytest.mark.parametrize("policy", ["modify_add", "modify_exist", "add_new"])
def test_panda_reaches_every_target_within_its_policy(policy):
    weights, bias = small_lr()
    x = (np.random.default_rng(1).random((20, 30)) < 0.3).astype(np.float32)
    targets = np.tile(np.arange(4), 5)
    noised, reached = panda(x, targets, decide_with(weights, bias), weights, bias, policy, tau=1.0, max_iterations=30)
    changed = noised != x
    # Modify_Add can reach any value (section 4.2); the other two may have no solution for some x
    assert reached.all() if policy == "modify_add" else reached.any()
    assert (decide_with(weights, bias)(noised)[reached] == targets[reached]).all()
    if policy == "modify_exist":
        assert not changed[x == 0].any()                 # only the non-zero entries move
    if policy == "add_new":
        assert not changed[x != 0].any() and (noised >= x).all()   # only zero entries, only upwards


def test_policies_without_a_solution_extend_to_modify_add():
    weights, bias = small_lr()
    empty = np.zeros((3, 30), np.float32)        # nothing to modify under Modify_Exist
    noised, reached = phase_one(empty, decide_with(weights, bias), weights, bias, "modify_exist", 1.0, 30)
    assert reached.all()
    assert (decide_with(weights, bias)(noised.reshape(-1, 30)) == np.tile(np.arange(4), 3)).all()


def scipy_mechanism(p, l0, beta):
    from scipy.optimize import minimize
    objective = lambda m: float(np.sum(p * np.log(p / np.maximum(m, 1e-12))))   # noqa: E731
    constraints = [{"type": "eq", "fun": lambda m: m.sum() - 1},
                   {"type": "ineq", "fun": lambda m: beta - m @ l0}]
    result = minimize(objective, np.full(len(p), 1 / len(p)), method="SLSQP", bounds=[(1e-9, 1)] * len(p),
                      constraints=constraints, options={"ftol": 1e-14, "maxiter": 1000})
    return result.x


@pytest.mark.parametrize("case", range(8))
def test_kkt_solution_matches_a_generic_convex_solver(case):
    rng = np.random.default_rng(case)
    m = int(rng.integers(3, 8))
    p = rng.dirichlet(np.ones(m))
    l0 = rng.integers(1, 12, m).astype(float)
    l0[rng.integers(m)] = 0                      # the value C infers already costs nothing
    beta = float(rng.uniform(0.3, 1.5) * (p @ l0))     # binding for most cases, not for some
    ours = kkt_mechanism(p[None], l0[None], beta)[0]
    assert ours.sum() == pytest.approx(1) and ours @ l0 <= beta + 1e-9
    np.testing.assert_allclose(ours, scipy_mechanism(p, l0, beta), atol=1e-5)
    if p @ l0 <= beta:
        np.testing.assert_allclose(ours, p)      # eq. 3 without a binding budget: M* = p


def test_draws_follow_the_mechanism_and_replay_only_when_seeded():
    mechanism = np.tile([[0.1, 0.6, 0.3]], (20000, 1))
    counts = np.bincount(draw(mechanism, np.random.default_rng(0)), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.1, 0.6, 0.3], atol=0.015)
    a, b = draw(mechanism[:50], np.random.default_rng()), draw(mechanism[:50], np.random.default_rng())
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(draw(mechanism[:50], np.random.default_rng(4)),
                                  draw(mechanism[:50], np.random.default_rng(4)))


@pytest.mark.boots
def test_the_stage_is_torch_free():
    code = "import sys; import sensorveil.runtime.stages.attriguard; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


@pytest.fixture(scope="module")
def attriguard_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    return train_run("attriguard", "digits", out=tmp_path_factory.mktemp("runs") / "attriguard", attacker_epochs=2,
                     settings={"beta": "1.0"})


@pytest.mark.trains
def test_run_records_the_papers_attackers_and_its_budget(attriguard_run):
    run = json.loads((attriguard_run / "run.json").read_text())
    metrics = run["metrics"]
    assert set(metrics["attackers"]) == {"BA-A", "LR-A", "RF-A", "NN-A", "AT-A", "DD-A", "RC-A", "LRA-A"}
    # the released data moved the defender's own inference: LR-D is fooled more than on raw data
    assert metrics["defender_acc_private"] < run["reference"]["defender_acc_raw"]
    # Phase II keeps the expected number of modified entries (L0 of the noise) within beta, up to sampling
    assert 0 < metrics["expected_l0"] <= 1.0 + 0.3


@pytest.mark.parametrize("fmt", ["onnx", "tflite", "openvino"])
@pytest.mark.exports
@pytest.mark.trains
def test_bundle_runs_the_mechanism_as_the_sdk_does(attriguard_run, tmp_path, fmt):
    import torch

    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.datasets import load_dataset
    bundle = export_run(attriguard_run, fmt, tmp_path / fmt)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["pipeline"][0]["kind"] == "attriguard"
    assert all(record["status"] == "passed" for record in manifest["validation"])
    x = load_dataset("digits").x[:40]
    device = Privatizer.load(bundle, seed=9)(x)
    run = dataclasses.replace(read_run(attriguard_run), seed=9)
    mechanism = mechanisms.get("attriguard")
    sdk = mechanism.privatize(attriguard_run, run)(torch.from_numpy(x / 16.0)[:, None]).numpy()
    assert np.mean(np.all(np.isclose(device, sdk[:, 0] * 16.0, atol=1e-4), axis=(1, 2))) >= 0.95
