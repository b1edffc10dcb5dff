"""Sanitizer: distance correlation, the four latent mechanisms of section 3.1, the hyper-volume, and the
alpha-beta-VAE trained, exported (encoder and decoder graphs) and run by the runtime."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from sensorveil.runtime.stages.sanitizer import clip_rows, sanitize_latent, sanitize_sensitive
from sensorveil.sdk.mechanisms.sanitizer import distance_correlation, normalized_hypervolume
from sensorveil.sdk.rundir import read_run

ONE_CANDIDATE = {"beta_grid": (2.0,), "alpha_grid": ((1.0, 1.0, 1.0),)}     # no search: a short run


def test_distance_correlation_is_one_for_linear_and_near_zero_for_independent_variables():
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.normal(size=(1500, 3)))
    assert distance_correlation(a, 2 * a + 1).item() == pytest.approx(1.0, abs=1e-6)
    independent = torch.from_numpy(rng.normal(size=(1500, 3)))
    assert distance_correlation(a, independent).item() < 0.1     # the sample statistic's bias shrinks with n
    assert distance_correlation(a, a ** 2).item() > 0.3        # dependent without correlation: dcorr sees it


def test_distance_correlation_matches_a_hand_computed_value():
    """x = (0, 1, 2, 3, 5), y = x squared: U-centred distance matrices (Szekely and Rizzo 2014, eq. 3.1),
    written out element by element here, and dCor^2 = dCov_u(x, y) / sqrt(dCov_u(x, x) dCov_u(y, y))."""
    x, y = np.array([0.0, 1.0, 2.0, 3.0, 5.0]), np.array([0.0, 1.0, 4.0, 9.0, 25.0])
    n = len(x)

    def u_centred(v):
        d = np.abs(v[:, None] - v[None, :])
        out = np.zeros_like(d)
        for i in range(n):
            for j in range(n):
                if i != j:
                    out[i, j] = d[i, j] - d[i].sum() / (n - 2) - d[:, j].sum() / (n - 2) + d.sum() / ((n - 1) * (n - 2))
        return out

    A, B = u_centred(x), u_centred(y)
    dcov = lambda P, Q: (P * Q).sum() / (n * (n - 3))  # noqa: E731
    expected = np.sqrt(max(dcov(A, B) / np.sqrt(dcov(A, A) * dcov(B, B)), 0.0))
    got = distance_correlation(torch.tensor(x)[:, None], torch.tensor(y)[:, None]).item()
    assert got == pytest.approx(expected, abs=1e-6)


def test_distance_correlation_is_not_biased_up_on_small_independent_batches():
    """L3's batches: the plain estimator read about 0.4 on independent 4-d and 12-d Gaussians at n = 128,
    so it gave almost no signal; the bias-corrected one reads near 0 there and stays high when dependent."""
    rng = np.random.default_rng(1)
    independent = [distance_correlation(torch.from_numpy(rng.normal(size=(128, 4))),
                                        torch.from_numpy(rng.normal(size=(128, 12)))).item() for _ in range(20)]
    assert np.mean(independent) < 0.15
    a = torch.from_numpy(rng.normal(size=(128, 4)))
    b = torch.cat([a, torch.from_numpy(rng.normal(size=(128, 8)))], dim=1)
    assert distance_correlation(a, b).item() > 0.5


def test_suppression_and_generalization():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(50, 6)).astype(np.float32)
    out = sanitize_latent(z, 2, "suppression", {}, rng)
    assert (out[:, :2] == 0).all() and np.array_equal(out[:, 2:], z[:, 2:])
    centroids = np.array([[1.0, 2.0], [-3.0, 0.5], [0.0, 7.0]])
    general = sanitize_sensitive(z[:, :2].astype(np.float64), "generalization", {"centroids": centroids}, rng)
    assert all(any(np.allclose(row, c) for c in centroids) for row in general)


def test_sampling_draws_from_the_mixture():
    means = np.array([[0.0, 0.0], [40.0, -40.0]])       # far apart, so each draw's component is plain
    covariances = np.array([[[1.0, 0.5], [0.5, 2.0]], [[0.2, 0.0], [0.0, 0.3]]])
    params = {"mixture_weights": np.array([0.25, 0.75]), "mixture_means": means,
              "mixture_cholesky": np.linalg.cholesky(covariances)}
    draws = sanitize_sensitive(np.zeros((40000, 2)), "sampling", params, np.random.default_rng(2))
    np.testing.assert_allclose(draws.mean(0), 0.25 * means[0] + 0.75 * means[1], atol=0.5)
    near_first = draws[np.linalg.norm(draws - means[0], axis=1) < 20]
    assert len(near_first) / len(draws) == pytest.approx(0.25, abs=0.01)
    np.testing.assert_allclose(np.cov(near_first.T), covariances[0], atol=0.15)


def test_obfuscation_clips_then_adds_laplace_noise_of_the_stated_scale():
    z = np.random.default_rng(3).normal(0, 10, size=(5000, 4))
    assert np.linalg.norm(clip_rows(z, 2.0), axis=1).max() <= 2.0 + 1e-9
    out = sanitize_sensitive(np.zeros((20000, 4)), "obfuscation", {"clip_norm": 2.0, "laplace_scale": 0.7},
                             np.random.default_rng(4))
    assert np.abs(out).mean() == pytest.approx(0.7, rel=0.03)           # E|Lap(b)| = b


def test_draws_replay_only_when_seeded():
    params = {"clip_norm": 1.0, "laplace_scale": 1.0}
    z = np.zeros((20, 5), np.float32)
    a = sanitize_latent(z, 3, "obfuscation", params, np.random.default_rng())
    b = sanitize_latent(z, 3, "obfuscation", params, np.random.default_rng())
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(sanitize_latent(z, 3, "obfuscation", params, np.random.default_rng(7)),
                                  sanitize_latent(z, 3, "obfuscation", params, np.random.default_rng(7)))


def test_hypervolume_by_hand():
    # points (leakage, utility): (0.2, 0.5) and (0.6, 0.9) -> privacy 0.8 x utility 0.5 + 0.4 x (0.9 - 0.5)
    assert normalized_hypervolume([(0.2, 0.5), (0.6, 0.9)]) == pytest.approx(0.8 * 0.5 + 0.4 * 0.4)
    assert normalized_hypervolume([(0.2, 0.5), (0.3, 0.4)]) == pytest.approx(0.4)    # a dominated point adds nothing


@pytest.mark.boots
def test_the_stage_is_torch_free():
    code = "import sys; import sensorveil.runtime.stages.sanitizer; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


@pytest.fixture(scope="module")
def sanitizer_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    return train_run("sanitizer", "digits", out=tmp_path_factory.mktemp("runs") / "sanitizer", attacker_epochs=2,
                     epochs=3, settings={"mechanism": "generalization", **ONE_CANDIDATE})


@pytest.mark.trains
def test_run_records_leakage_utility_and_cas(sanitizer_run):
    run = json.loads((sanitizer_run / "run.json").read_text())
    metrics = run["metrics"]
    for key in ("probing_acc_private", "probing_acc_useful", "cas_useful", "cas_private", "hypervolume"):
        assert key in metrics
    assert metrics["hypervolume"] == pytest.approx(
        normalized_hypervolume([(metrics["probing_acc_private"], metrics["probing_acc_useful"])]))
    assert len(run["training"]["history"]) == 3 and {"neg_L1", "L2", "L3", "L4"} <= set(run["training"]["history"][0])


@pytest.mark.parametrize("fmt", ["onnx", "tflite", "openvino"])
@pytest.mark.exports
@pytest.mark.trains
def test_bundle_runs_encoder_mechanism_decoder_as_the_sdk_does(sanitizer_run, tmp_path, fmt):
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.datasets import load_dataset
    bundle = export_run(sanitizer_run, fmt, tmp_path / fmt)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [stage["kind"] for stage in manifest["pipeline"]] == ["model", "posterior-sample", "sanitizer", "model"]
    assert sorted(r["graph"] for r in manifest["validation"]) == ["decoder", "encoder"]
    assert all(r["status"] == "passed" for r in manifest["validation"])
    x = load_dataset("digits").x[:30]
    device = Privatizer.load(bundle, seed=3)(x)
    run = dataclasses.replace(read_run(sanitizer_run), seed=3)
    sdk = mechanisms.get("sanitizer").privatize(sanitizer_run, run)(torch.from_numpy(x / 16.0)[:, None])
    np.testing.assert_allclose(device, sdk.numpy()[:, 0] * 16.0, atol=16 * 2e-3)


@pytest.mark.exports
@pytest.mark.trains
def test_the_release_samples_the_posterior_and_replays_only_when_seeded(sanitizer_run, tmp_path):
    """Section 3.1 releases z ~ q_phi(x): the device draws it (OS entropy), so two calls differ; a seed
    replays the draw."""
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    bundle = export_run(sanitizer_run, "onnx", tmp_path / "bundle")
    x = load_dataset("digits").x[:10]
    p = Privatizer.load(bundle)
    assert not np.array_equal(p(x), p(x))
    np.testing.assert_array_equal(Privatizer.load(bundle, seed=5)(x), Privatizer.load(bundle, seed=5)(x))


@pytest.mark.exports
@pytest.mark.trains
def test_a_mean_release_bundle_is_the_older_pipeline_and_still_runs(tmp_path):
    """release="mean" exports what every Sanitizer bundle before the posterior draw was: encoder (mean),
    sanitizer, decoder; such bundles load and run as they did."""
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.runs import train_run
    run = train_run("sanitizer", "digits", out=tmp_path / "run", attacker_epochs=1, epochs=1,
                    settings={"mechanism": "suppression", "release": "mean", **ONE_CANDIDATE})
    bundle = export_run(run, "onnx", tmp_path / "bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [stage["kind"] for stage in manifest["pipeline"]] == ["model", "sanitizer", "model"]
    x = load_dataset("digits").x[:10]
    p = Privatizer.load(bundle)
    np.testing.assert_array_equal(p(x), p(x))      # suppression of the mean: nothing random left


@pytest.mark.trains
def test_an_unknown_release_is_one_clear_error(tmp_path):
    from sensorveil.sdk.runs import train_run
    with pytest.raises(ValueError, match="release 'median'; expected one of"):
        train_run("sanitizer", "digits", out=tmp_path / "run", attacker_epochs=1, epochs=1,
                  settings={"release": "median"})


def digits_task():
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.mechanisms.base import protocol_task
    return protocol_task(load_dataset("digits"), "parity", "lt5", 0)


def test_the_choice_of_beta_and_alphas_never_reads_the_test_rows():
    """Every test row is NaN: a choice that touched one would train on NaN and score NaN (or fail)."""
    from dataclasses import replace

    from sensorveil.sdk.mechanisms.sanitizer import SanitizerConfig
    from sensorveil.sdk.mechanisms.sanitizer_parts.choice import choose
    task = digits_task()
    task = replace(task, x=task.x.clone())     # the loaded data set stays as it was for the other tests
    task.x[task.test] = float("nan")
    config = SanitizerConfig(beta_grid=(1.5, 3.0), alpha_grid=((1.0, 1.0, 1.0),), components=2, progress=False)
    chosen, record = choose(task, task.attacker_train, config, epochs=2, step=1 / 16)
    figures = [row["validation"] for row in record["grid"]]
    assert record["searched"] and len(figures) == 2
    assert all(np.isfinite([f["leakage"], f["utility"], f["score"]]).all() for f in figures)
    best = record["grid"][int(np.argmax([f["score"] for f in figures]))]
    assert chosen == {key: best[key] for key in chosen}
    assert record["fitting_rows"] + record["validation_rows"] == len(task.attacker_train)


def test_the_choice_takes_the_best_validation_score_on_rows_carved_from_the_training_rows():
    from sensorveil.sdk.mechanisms.sanitizer import SanitizerConfig
    from sensorveil.sdk.mechanisms.sanitizer_parts.choice import choose
    task = digits_task()
    seen = []

    def scorer(task_, fit_rows, val_rows, config, epochs, step):
        seen.append((set(fit_rows), set(val_rows)))
        return {"leakage": 0.5, "utility": 0.5, "score": -abs(config.beta - 3.0) - config.alpha3}

    config = SanitizerConfig(beta_grid=(1.5, 3.0, 6.0), alpha_grid=((1.0, 10.0, 1.0), (1.0, 1.0, 1.0)))
    chosen, record = choose(task, task.attacker_train, config, 2, 1 / 16, scorer=scorer)
    assert chosen == {"beta": 3.0, "alpha1": 1.0, "alpha2": 1.0, "alpha3": 1.0, "alpha4": 1.0}
    assert record["chosen"] == chosen and len(record["grid"]) == 6
    training, test = set(task.attacker_train), set(task.test)
    for fit_rows, val_rows in seen:
        assert fit_rows | val_rows == training and not fit_rows & val_rows and not (fit_rows | val_rows) & test


def test_a_beta_of_one_or_less_is_refused_before_any_work(tmp_path):
    from sensorveil.sdk.runs import train_run
    with pytest.raises(ValueError, match="must exceed 1"):
        train_run("sanitizer", "digits", out=tmp_path / "run", attacker_epochs=1, epochs=1,
                  settings={"beta_grid": (1.0, 2.0)})


def test_run_json_records_the_chosen_beta_and_alphas(sanitizer_run):
    run = json.loads((sanitizer_run / "run.json").read_text())
    assert run["choice"]["chosen"] == {"beta": 2.0, "alpha1": 1.0, "alpha2": 1.0, "alpha3": 1.0, "alpha4": 1.0}
    assert run["config"]["beta"] == 2.0 and run["choice"]["validation_rows"] > 0


class FixedPosterior(torch.nn.Module):
    """An encoder whose q(z|x) is N(0, 9 I) for every x: its means are all 0, its draws spread 3 a side."""

    def forward(self, x):
        zeros = torch.zeros(len(x), 3)
        return zeros, zeros + float(np.log(9.0))


def test_the_mixture_is_fitted_on_posterior_draws_when_the_release_draws():
    from sensorveil.sdk.mechanisms.sanitizer import SanitizerConfig, fit_parameters
    x = torch.zeros(4000, 5)
    drawn = fit_parameters(FixedPosterior(), x, SanitizerConfig(latent_dim=3, sensitive_dim=2, components=1))
    np.testing.assert_allclose(np.diag(drawn["mixture_cholesky"][0]), [3.0, 3.0], rtol=0.05)
    means = fit_parameters(FixedPosterior(), x, SanitizerConfig(latent_dim=3, sensitive_dim=2, components=1,
                                                                 release="mean"))
    assert np.diag(means["mixture_cholesky"][0]).max() < 0.01      # the mean release: what it releases, the means


@pytest.fixture(scope="module")
def suppression_run(tmp_path_factory):
    from sensorveil.sdk.runs import train_run
    return train_run("sanitizer", "digits", out=tmp_path_factory.mktemp("runs") / "suppression", attacker_epochs=2,
                     epochs=2, settings={"mechanism": "suppression", **ONE_CANDIDATE})


def test_the_private_cas_trains_on_the_relabelled_y_s(suppression_run):
    """Suppression releases z~_S = 0 for every row, so y~_S = g_u(0) is one class c: a CAS classifier trained
    on y~_S guesses c everywhere and scores the raw test rows' share of c. True labels would score otherwise."""
    from sensorveil.sdk.mechanisms import get
    run = read_run(suppression_run)
    _, nets, _ = get("sanitizer").load_all(suppression_run, run)
    with torch.no_grad():
        c = int(nets["aligner"](torch.zeros(1, 4)).argmax(1))
    task = digits_task()
    metrics = run.metrics
    assert metrics["cas_private"] == pytest.approx(float((task.private[task.test] == c).mean()))
    assert metrics["relabelled_agreement"] == pytest.approx(float((task.private[task.attacker_train] == c).mean()))
