"""PR-GAN-MED (beyond the papers): z' ~ MED(z | y) drawn on the device, G conditioned on (y, z', noise).
The draw follows MED, the bundle runs torch-free with the Privatizer's seed (replayable only when
seeded), the stage's manifest entry is validated, and a trained generator steers the fixed D_z."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime.stages.prgan_med import draw_private, generator_input

MED = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])


def test_draws_follow_med_of_each_rows_useful_value():
    useful = np.repeat([0, 1], 20000)
    drawn = draw_private(MED, useful, np.random.default_rng(0))
    for y in (0, 1):
        counts = np.bincount(drawn[useful == y], minlength=3) / 20000
        np.testing.assert_allclose(counts, MED[y], atol=0.015)


def test_generator_input_layout():
    x = np.arange(12, dtype=np.float32).reshape(2, 1, 2, 3)
    packed = generator_input(x, np.array([1, 0]), np.array([2, 0]), np.full((2, 4), 0.5), 2, 3)
    assert packed.dtype == np.float32 and packed.shape == (2, 6 + 2 + 3 + 4)
    np.testing.assert_array_equal(packed[:, :6], x.reshape(2, 6))
    np.testing.assert_array_equal(packed[:, 6:11], [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0]])
    assert (packed[:, 11:] == 0.5).all()


@pytest.fixture(scope="module")
def med_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    from tests.conftest import tiny_config
    config = tiny_config(epochs=8, classifier_epochs=6, margin_fractions=(0.5,))
    return train_run("prgan-med", "digits", out=tmp_path_factory.mktemp("runs") / "prgan-med", config=config,
                     attacker_epochs=1)


@pytest.fixture(scope="module")
def med_bundle(med_run, tmp_path_factory):
    from sensorveil.export import export_run
    return export_run(med_run, "onnx", tmp_path_factory.mktemp("bundles") / "prgan-med")


@pytest.mark.exports
@pytest.mark.trains
def test_bundle_declares_the_med_stage_and_validates_both_graphs(med_bundle):
    manifest = json.loads((med_bundle / "manifest.json").read_text())
    assert manifest["mechanism"]["name"] == "prgan-med"
    assert [stage["kind"] for stage in manifest["pipeline"]] == ["prgan-med"]
    np.testing.assert_allclose(np.load(med_bundle / manifest["pipeline"][0]["med"]), [[0.4, 0.6], [0.6, 0.4]])
    assert {r["graph"]: r["status"] for r in manifest["validation"]} == {"classifier": "passed",
                                                                         "generator": "passed"}


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_bundle_is_random_unless_seeded_and_runs_without_torch(med_bundle):
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    x = load_dataset("digits").x[:64]
    first = Privatizer.load(med_bundle, seed=3)(x)
    assert first.shape == x.shape and first.dtype == x.dtype and 0 <= first.min() and first.max() <= 16
    np.testing.assert_array_equal(first, Privatizer.load(med_bundle, seed=3)(x))
    assert not np.array_equal(first, Privatizer.load(med_bundle, seed=4)(x))
    assert not np.array_equal(Privatizer.load(med_bundle)(x), Privatizer.load(med_bundle)(x))   # OS entropy
    code = f"""
import sys, numpy as np
from sensorveil.runtime import Privatizer
y = Privatizer.load({str(med_bundle)!r})(np.full((3, 8, 8), 7.0, dtype=np.float32))
assert y.shape == (3, 8, 8), y.shape
print("LEAKED", [m for m in ("torch", "sensorveil.sdk", "sensorveil.export", "sklearn") if m in sys.modules])
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LEAKED []" in result.stdout, result.stdout + result.stderr


@pytest.mark.exports
@pytest.mark.trains
def test_a_stage_naming_a_graph_the_bundle_lacks_is_refused(med_bundle, tmp_path):
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.errors import BundleError
    broken = tmp_path / "broken"
    shutil.copytree(med_bundle, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["pipeline"][0]["generator"] = "nope"
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="runs graph 'nope'"):
        Privatizer.load(broken)


@pytest.mark.trains
def test_fixed_dz_reads_the_drawn_private_value_more_often_than_chance(med_run):
    """G is trained so the fixed D_z reads z' (eq. 8 aimed at z'): with z' forced to each value on the
    same test rows, D_z must follow it more often than a D_z that ignored the condition would (1/2)."""
    import torch

    from sensorveil.runtime.stages.prgan_med import generator_input
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.rundir import read_run
    from sensorveil.sdk.training import apply, predict
    exp, G = mechanisms.get("prgan-med").load(med_run, read_run(med_run))
    x = exp.x[exp.slices["test"]]
    useful, rng = predict(exp.fixed["D_y"], x), np.random.default_rng(0)
    follows = []
    for value in (0, 1):
        packed = generator_input(x.numpy(), useful, np.full(len(x), value), rng.standard_normal((len(x), 8)), 2, 2)
        follows.append(float((predict(exp.fixed["D_z"], apply(G, torch.from_numpy(packed))) == value).mean()))
    assert np.mean(follows) > 0.6, follows
