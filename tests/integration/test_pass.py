"""PASS end to end on a tiny digits run: training, export, the runtime's two output modes, the
statistics of its sampler, seeds, errors, metrics, and the MotionSense loader on a fake folder."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sensorveil.runtime import BundleError, InputError, Privatizer
from sensorveil.runtime.spec import to_model_units
from sensorveil.runtime.stages.substitution import draw_indices

# Sampler check: reject at significance 1e-3 (a correct sampler fails 1 run in 1000); categories
# with expected count < 5 are pooled so the chi-square approximation holds.
CHI2_ALPHA = 1e-3
DRAWS = 20000


@pytest.fixture(scope="module")
def pass_run(tmp_path_factory):
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.runs import train_run
    out = tmp_path_factory.mktemp("runs") / "pass-digits"
    return train_run("pass", "digits", out=out, useful=["parity"], private=["lt5"], hidden=["digit"],
                     config=PASSConfig(epochs=3, substitutes=256, progress=False), attacker_epochs=1)


@pytest.fixture(scope="module")
def pass_bundle(pass_run, tmp_path_factory):
    from sensorveil.export import export_run
    return export_run(pass_run, "onnx", tmp_path_factory.mktemp("bundles") / "pass-digits")


@pytest.fixture(scope="module")
def index_only_bundle(pass_run, tmp_path_factory):
    from sensorveil.export import export_run
    return export_run(pass_run, "onnx", tmp_path_factory.mktemp("bundles") / "pass-index", include_samples=False)


@pytest.fixture(scope="module")
def digits():
    from sensorveil.sdk.datasets import load_dataset
    return load_dataset("digits")


def spread_input(privatizer, digits) -> tuple[np.ndarray, np.ndarray]:
    """The digit (of the first 50) whose P(X'|X) has the highest entropy, and that distribution."""
    draw = privatizer.pipeline.stages[-1]
    probs = draw.probabilities(privatizer.pipeline.run_model(to_model_units(digits.x[:50], privatizer.input_spec)))
    entropy = -(probs * np.log(np.clip(probs, 1e-30, None))).sum(1)
    best = int(entropy.argmax())
    return digits.x[best], probs[best].astype(np.float64)


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    from scipy.stats import chisquare
    expected = probs / probs.sum() * counts.sum()
    big = expected >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    keep = expected > 0
    return float(chisquare(observed[keep], expected[keep]).pvalue), int(keep.sum())


@pytest.mark.trains
def test_run_records_the_pass_task_and_metrics(pass_run):
    run = json.loads((pass_run / "run.json").read_text())
    assert run["mechanism"] == "pass" and run["kind"] == "substitution"
    assert run["useful"] == ["parity"] and run["private"] == ["lt5"] and run["hidden"] == ["digit"]
    sub = run["substitution"]
    assert sub["bank_size"] == 256 and sub["tau"] == 0.01
    assert sub["lambda"] == 1.0 and sub["mu"] == pytest.approx(0.2)     # N/M and 0.2 N (section 5.1)
    # eq. 10 with M = N = 1, lambda = 1, mu = 0.2: (1 - 0.2) log 256 - H(parity) + 1
    assert sub["constant_C"] == pytest.approx(0.8 * np.log(256) - np.log(2) + 1, abs=0.01)
    bank = np.load(pass_run / "bank_indices.npy", allow_pickle=False)
    assert bank.shape == (256,) and len(np.unique(bank)) == 256
    metrics = run["metrics"]
    for attr in ("parity", "lt5", "digit"):
        assert 0.0 <= metrics["attributes"][attr]["nag"] <= 1.0 + 1e-9
    lt5 = metrics["attributes"]["lt5"]
    assert {"tree_acc", "random_star", "acc"} <= set(lt5)
    assert lt5["random_star"] == pytest.approx(0.6, abs=0.03)    # 3 of the 5 even digits are < 5
    assert "nag_unfinetuned" in metrics["attributes"]["parity"]
    assert np.asarray(metrics["confusion"]["parity"]).shape == (2, 2)
    assert (pass_run / "substitution_confusion.png").stat().st_size > 1000


@pytest.mark.exports
@pytest.mark.trains
def test_bundle_carries_the_head_and_the_bank(pass_bundle, pass_run):
    manifest = json.loads((pass_bundle / "manifest.json").read_text())
    assert manifest["mechanism"]["kind"] == "substitution" and manifest["schema_version"] == 2
    model, draw = manifest["pipeline"]
    assert model == {"kind": "model", "graph": "model"}
    assert draw["kind"] == "substitution" and draw["bank_size"] == 256 and draw["output_default"] == "sample"
    assert {"bank_indices.npy", "substitutes.npy", "model.onnx"} <= set(manifest["files"])
    assert all(record["status"] == "passed" for record in manifest["validation"])
    np.testing.assert_array_equal(np.load(pass_bundle / "bank_indices.npy", allow_pickle=False),
                                  np.load(pass_run / "bank_indices.npy", allow_pickle=False))


@pytest.mark.exports
@pytest.mark.trains
def test_runtime_sample_and_index_modes(pass_bundle, digits):
    bank_rows = np.load(pass_bundle / "bank_indices.npy", allow_pickle=False)
    sampler = Privatizer.load(pass_bundle)                       # default: sample mode
    out = sampler(digits.x[:40])
    assert sampler.output_mode == "sample" and out.shape == (40, 8, 8) and out.dtype == digits.x.dtype
    bank = digits.x[bank_rows].reshape(len(bank_rows), -1)
    assert all((bank == row.reshape(1, -1)).all(1).any() for row in out)   # every output is a substitute
    indexer = Privatizer.load(pass_bundle, output="index")
    positions = indexer(digits.x[:40])
    assert positions.dtype == np.uint16 and positions.shape == (40,) and positions.max() < 256
    single = indexer(digits.x[0])
    assert np.ndim(single) == 0
    assert indexer.bytes_per_frame() == {"index": 2, "sample": 8 * 8 * 4}


@pytest.mark.exports
@pytest.mark.trains
def test_a_held_persons_crop_skips_the_model_and_a_new_one_draws_from_its_own_scores(pass_bundle, digits):
    privatizer = Privatizer.load(pass_bundle, output="index", seed=5)
    stage, rows = privatizer.pipeline.stages[0], []
    graph = stage.run
    stage.run = lambda batch: rows.append(len(batch)) or graph(batch)
    first = privatizer(digits.x[:3], keys=["a", "b", "c"])
    # the first call draws for everyone, exactly as a call without keys with the same seed
    assert rows == [3] and np.array_equal(first, Privatizer.load(pass_bundle, output="index", seed=5)(digits.x[:3]))
    again = privatizer(digits.x[3:7], keys=["b", "d", "a", "c"])      # only "d" is new: its crop alone is scored
    assert rows == [3, 1] and again[[0, 2, 3]].tolist() == first[[1, 0, 2]].tolist()
    privatizer(digits.x[:2], keys=["a", "b"])                        # nobody new: the model does not run
    assert rows == [3, 1]
    # each new person's draw comes from their own row of scores: a graph sure of one substitute per crop
    bank = privatizer.pipeline.stages[-1].bank_size

    def sure(batch):
        chosen = (batch.reshape(len(batch), -1) * 255).astype(int).sum(axis=1) % bank
        return 60.0 * (np.arange(bank)[None] == chosen[:, None])
    stage.run = sure
    crops = digits.x[10:14]
    wanted = sure(to_model_units(crops, privatizer.input_spec)).argmax(axis=1)
    assert len(set(wanted.tolist())) > 2       # different crops, different substitutes: a row mix-up would show
    out = privatizer(np.concatenate([digits.x[:2], crops]), keys=["a", "b", "p", "q", "r", "s"])
    assert out[2:].tolist() == wanted.tolist() and out[:2].tolist() == first[:2].tolist()


def test_a_held_draw_missing_for_a_new_key_is_refused_not_made_up():
    from sensorveil.runtime.errors import OutputError
    from sensorveil.runtime.stages.substitution import HeldDraws
    held = HeldDraws()
    assert held.needs_draw(["a", "b"]).tolist() == [True, True]
    held(np.array([4, 2]), ["a", "b"])
    assert held.needs_draw(["a", "c", "b"], known=[-1, -1, 1]).tolist() == [False, True, True]   # b: now known
    with pytest.raises(OutputError, match="'c' needs a fresh draw"):
        held(np.array([-1, -1]), ["a", "c"])


def test_sampler_matches_a_known_distribution():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.full(40, 0.5))
    draws = draw_indices(np.repeat(probs[None], DRAWS, 0), np.random.default_rng(2))
    pvalue, bins = chi_square_pvalue(np.bincount(draws, minlength=40), probs)
    assert bins >= 10 and pvalue > CHI2_ALPHA
    # the test has power: the same draws fail against a distribution with two substitutes swapped
    likely, rare = int(probs.argmax()), int(probs.argmin())
    swapped = probs.copy()
    swapped[[likely, rare]] = swapped[[rare, likely]]
    assert chi_square_pvalue(np.bincount(draws, minlength=40), swapped)[0] < CHI2_ALPHA


@pytest.mark.exports
@pytest.mark.trains
def test_runtime_frequencies_match_exported_probabilities(pass_bundle, digits):
    privatizer = Privatizer.load(pass_bundle, output="index", seed=3)
    x, probs = spread_input(privatizer, digits)
    positions = privatizer(np.repeat(x[None], DRAWS, 0)).astype(np.int64)
    pvalue, bins = chi_square_pvalue(np.bincount(positions, minlength=len(probs)), probs)
    assert bins >= 3, "P(X'|X) of the tiny run is too concentrated for a meaningful test"
    assert pvalue > CHI2_ALPHA


@pytest.mark.exports
@pytest.mark.trains
def test_unseeded_runtimes_differ_and_seeded_ones_repeat(pass_bundle, digits):
    first, second = Privatizer.load(pass_bundle, output="index"), Privatizer.load(pass_bundle, output="index")
    x, probs = spread_input(first, digits)
    assert probs.max() < 0.9    # otherwise equal sequences would be likely and prove nothing
    batch = np.repeat(x[None], 200, 0)
    assert not np.array_equal(first(batch), second(batch))
    seeded = [Privatizer.load(pass_bundle, output="index", seed=11)(batch) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])


@pytest.mark.exports
@pytest.mark.trains
def test_bad_output_mode_gives_one_clear_error(pass_bundle, index_only_bundle, digits_bundle):
    with pytest.raises(InputError, match="expected one of \\['index', 'sample'\\]"):
        Privatizer.load(pass_bundle, output="pixels")
    with pytest.raises(BundleError, match="carries no substitute samples"):
        Privatizer.load(index_only_bundle, output="sample")
    assert Privatizer.load(index_only_bundle).output_mode == "index"
    with pytest.raises(InputError, match="only for substitution"):
        Privatizer.load(digits_bundle, output="index")


@pytest.mark.exports
@pytest.mark.trains
def test_bundle_evaluation_runs_through_the_runtime(pass_bundle, pass_run):
    from sensorveil.sdk.assess import evaluate_path
    result = evaluate_path(pass_bundle, attacker_epochs=1)
    run = json.loads((pass_run / "run.json").read_text())
    assert result["backend"] == "onnxruntime" and np.isfinite(result["mnag"])
    # the same rows, bank and baselines as the run; only the draws (OS entropy) and attackers differ
    for key in ("n_attacker_train", "n_test", "bank_size", "random_star"):
        assert result[key] == run["metrics"].get(key, run["reference"].get(key)), key


def test_nag_and_mnag_follow_eq_13_and_14():
    from sensorveil.sdk.mechanisms.pass_substitution import mnag, nag
    assert nag(0.75, 0.5, 1.0) == pytest.approx(0.5)
    assert nag(0.4, 0.5, 1.0) == 0.0                   # clipped at 0
    assert nag(0.9, 0.5, 0.5) == 0.0                   # raw data no better than guessing
    assert mnag([1.0, 0.5], [0.0], [0.2, 0.4]) == pytest.approx(0.5 - 0.3)


@pytest.mark.trains
def test_cli_accepts_several_attributes_for_pass():
    from sensorveil.cli import build_parser
    args = build_parser().parse_args(["train", "pass", "--dataset", "digits", "--private", "lt5", "digit",
                                      "--useful", "parity", "--hidden", "digit", "--substitutes", "512"])
    assert args.private == ["lt5", "digit"] and args.hidden == ["digit"] and args.substitutes == 512


def write_fake_motionsense(root, rows: int = 300) -> None:
    """The MotionSense release layout: A_DeviceMotion_data/<act>_<trial>/sub_<n>.csv + subjects CSV."""
    header = (",attitude.roll,attitude.pitch,attitude.yaw,gravity.x,gravity.y,gravity.z,rotationRate.x,"
              "rotationRate.y,rotationRate.z,userAcceleration.x,userAcceleration.y,userAcceleration.z")
    rng = np.random.default_rng(0)
    (root / "data_subjects_info.csv").write_text("code,weight,height,age,gender\n1,102,188,46,1\n2,72,180,28,0\n")
    for folder in ("dws_1", "jog_16", "sit_5", "std_14"):
        (root / "A_DeviceMotion_data" / folder).mkdir(parents=True)
        for subject in (1, 2):
            table = np.column_stack([np.arange(rows), rng.normal(size=(rows, 12))])
            table[:, 7:10] = [3.0, 0.0, 4.0]           # |rotationRate| = 5
            np.savetxt(root / "A_DeviceMotion_data" / folder / f"sub_{subject}.csv", table, delimiter=",",
                       header=header, comments="")


def test_motionsense_loader_on_a_fake_release(tmp_path):
    from sensorveil.sdk.datasets import load_dataset
    write_fake_motionsense(tmp_path)
    data = load_dataset("motionsense", tmp_path)
    per_file = (300 - 128) // 10 + 1
    assert data.x.shape == (2 * 2 * per_file, 2, 128) and data.modality == "timeseries"
    assert set(data.class_names["activity"]) == {"dws", "ups", "wlk", "jog"}          # sit, std excluded
    assert set(np.unique(data.attributes["activity"])) == {0, 3}
    np.testing.assert_allclose(data.x[:, 0], 5.0, rtol=1e-5)                          # gyroscope magnitude
    split = data.attributes["trial_split"]
    assert (split[data.attributes["activity"] == 0] == 0).all()                       # dws_1: train
    assert (split[data.attributes["activity"] == 3] == 1).all()                       # jog_16: test
    assert set(np.unique(data.attributes["gender"])) == {0, 1} and data.num_classes["id"] == 2
    assert len(load_dataset("motionsense", tmp_path, split="test")) == 2 * per_file
    with pytest.raises(ValueError, match="A_DeviceMotion_data"):
        load_dataset("motionsense", tmp_path / "A_DeviceMotion_data" / "dws_1")


def test_losses_of_eq_4_to_8_match_hand_computed_values():
    """A batch of 4 rows over a bank of 2 substitutes, computed by hand:
    P(X'|x) rows: [.5 .5], [.5 .5], [.9 .1], [.1 .9]; private s = [0, 0, 1, 1]; useful u = [0, 1, 0, 1];
    the bank's useful labels U' = [0, 1]."""
    import math

    import torch

    from sensorveil.sdk.mechanisms.pass_substitution import general_loss, pass_loss, private_loss, useful_loss
    p = torch.tensor([[.5, .5], [.5, .5], [.9, .1], [.1, .9]], dtype=torch.float64)
    log_p, s, u, bank_u = p.log(), torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1]), torch.tensor([0, 1])
    h = lambda q: -sum(x * math.log(x) for x in q)   # noqa: E731
    # eq. 5: P(X'|S=0) = [.5 .5], P(X'|S=1) = [.5 .5]; eq. 4: L_S = -(1/2 H + 1/2 H) = -log 2
    assert private_loss(log_p, s, 2).item() == pytest.approx(-math.log(2))
    # eq. 7: P(U'=u|x) = P(x' with U'=u | x) = .5, .5, .9, .9; eq. 6: L_U = log 2 * mean(-log P)
    expected_u = math.log(2) * (-(2 * math.log(.5) + 2 * math.log(.9)) / 4)
    assert useful_loss(log_p, u, bank_u, 2).item() == pytest.approx(expected_u)
    # eq. 8: L_X = mean row entropy
    assert general_loss(log_p).item() == pytest.approx((2 * h([.5, .5]) + 2 * h([.9, .1])) / 4)
    total, parts = pass_loss(log_p, [s], [2], [u], [bank_u], [2], lam=2.0, mu=0.5)
    assert total.item() == pytest.approx(-math.log(2) + 2.0 * expected_u + 0.5 * parts["L_X"])


def test_constant_c_of_eq_10_with_several_attributes():
    """eq. 10 generalised by its derivation (eq. 29): C = (M - mu) log|D| - lambda sum_j H(U_j) + lambda N,
    here with M = 2 private and N = 2 useful attributes, |D| = 8, mu = 0.4, lambda = 1."""
    import math

    from sensorveil.sdk.mechanisms.pass_substitution import constant_c
    uniform = np.array([0, 1, 0, 1])          # H = log 2
    skewed = np.array([0, 0, 0, 1])           # H = -(3/4 log 3/4 + 1/4 log 1/4)
    h_skewed = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    expected = (2 - 0.4) * math.log(8) - 1.0 * (math.log(2) + h_skewed) + 1.0 * 2
    assert constant_c(2, 0.4, 1.0, 8, [uniform, skewed]) == pytest.approx(expected)


def test_restricted_draw_keeps_only_substitutes_that_share_the_known_value():
    from sensorveil.runtime.stages.substitution import restrict_to_known
    probs = np.full((3, 4), 0.25)
    bank_labels = np.array([0, 1, 1, 0])
    out = restrict_to_known(probs, bank_labels, np.array([1, -1, 0]))
    assert out[0].tolist() == [0, 0.25, 0.25, 0] and out[1].tolist() == [0.25] * 4
    assert out[2].tolist() == [0.25, 0, 0, 0.25]
    with pytest.raises(InputError, match="expected one per sample"):
        restrict_to_known(probs, bank_labels, np.array([1, 0]))


@pytest.fixture(scope="module")
def conditioned_bundle(tmp_path_factory):
    from sensorveil.export import export_run
    from sensorveil.sdk.mechanisms.pass_substitution import PASSConfig
    from sensorveil.sdk.runs import train_run
    run = train_run("pass", "digits", out=tmp_path_factory.mktemp("runs") / "pass-conditioned", useful=["parity"],
                    private=["lt5"], config=PASSConfig(epochs=2, substitutes=128, progress=False, condition="parity"),
                    attacker_epochs=1)
    return export_run(run, "onnx", tmp_path_factory.mktemp("bundles") / "pass-conditioned")


@pytest.mark.exports
@pytest.mark.trains
def test_conditioned_bundle_draws_only_among_substitutes_the_device_knows_match(conditioned_bundle, digits):
    manifest = json.loads((conditioned_bundle / "manifest.json").read_text())
    assert manifest["pipeline"][-1]["condition"]["attribute"] == "parity"
    bank_parity = np.load(conditioned_bundle / "bank_condition.npy")
    privatizer = Privatizer.load(conditioned_bundle, output="index", seed=1)
    assert privatizer.conditioned_on == "parity"
    x, parity = digits.x[:200], digits.attributes["parity"][:200]
    for known in (parity, 1 - parity):          # whatever the device says, the draw follows it
        assert (bank_parity[privatizer(x, known=known).astype(np.int64)] == known).all()
    # -1 (not known yet, e.g. a person just appeared): the unrestricted draw, the same as without known
    unknown = Privatizer.load(conditioned_bundle, output="index", seed=5)(x, known=np.full(len(x), -1))
    assert (unknown == Privatizer.load(conditioned_bundle, output="index", seed=5)(x)).all()
    with pytest.raises(InputError, match="known of"):
        privatizer(x, known=parity[:10])


def test_pretraining_starts_g_at_f_of_each_substitute_and_f_reading_the_useful_label(digits):
    """PASSConfig.pretrain_epochs: f learns the useful label first and g starts at f(bank sample), so
    P(X'|X) begins on substitutes that share x's useful label (from a random f and g it does not)."""
    import torch

    from sensorveil.sdk.mechanisms.pass_substitution import (
        PASSConfig,
        SubstitutionHead,
        SubstitutionModel,
        make_embedding,
        prepare_data,
        pretrain_embedding,
        probabilities,
    )
    from sensorveil.sdk.training import apply, model_shape
    data = prepare_data(digits, ["parity"], ["lt5"], substitutes=256, seed=0)
    config = PASSConfig(embedding_dim=64, progress=False)
    torch.manual_seed(0)
    model = SubstitutionModel(make_embedding("image", model_shape(digits), 64), 256, 64, config.tau)

    def same_parity_mass() -> float:
        probs = probabilities(SubstitutionHead(model).eval(), data.x[data.test_rows])
        bank = data.labels("parity")[data.bank_rows]
        return float((probs * (bank[None] == data.labels("parity")[data.test_rows][:, None])).sum(1).mean())
    before = same_parity_mass()
    pretrain_embedding(model, data, epochs=3, config=config)
    assert torch.allclose(model.g, apply(model.embed, data.x[data.bank_rows]))
    assert before < 0.7 < same_parity_mass()


def test_input_dropout_sets_only_entries_above_the_floor_to_it_and_is_off_at_zero():
    import torch

    from sensorveil.sdk.mechanisms.pass_parts.train import input_dropout
    x = torch.tensor([[-1.0, 1.0, 1.0, -1.0] * 250] * 8)        # binary inputs in model units: -1 "not heard"
    generator = torch.Generator().manual_seed(0)
    assert input_dropout(x, 0.0)(x, generator) is x
    dropped = input_dropout(x, 0.25)(x, generator)
    heard = x > -1
    assert ((dropped == x) | (dropped == -1)).all()               # an entry stays or falls to the floor
    share = float(((dropped == -1) & heard).sum() / heard.sum())
    assert 0.22 < share < 0.28
    with pytest.raises(ValueError, match="input_dropout=1.0"):
        input_dropout(x, 1.0)
