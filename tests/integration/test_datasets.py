"""Tests for sensorveil.sdk.datasets (fast: no network, real UJIIndoorLoc if present)."""
import os
from pathlib import Path

import numpy as np
import pytest

from sensorveil.sdk.datasets import (
    DATASETS,
    SensorDataset,
    load_dataset,
    make_identities,
    render_depth_frame,
    stratified_slices,
    synthetic_depth_frames,
)

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
UJI_ZIP = SHARED / "datasets" / "ujiindoorloc.zip"
needs_uji = pytest.mark.skipif(not UJI_ZIP.is_file(), reason=f"UJIIndoorLoc zip not found at {UJI_ZIP} "
                               "(set SENSORVEIL_SHARED to the folder holding datasets/ujiindoorloc.zip)")


def check_consistent(ds: SensorDataset) -> None:
    """Invariants every dataset must satisfy."""
    assert len(ds) == ds.x.shape[0] and ds.sample_shape == ds.x.shape[1:]
    lo, hi = ds.sensor_range
    assert lo <= ds.x.min() and ds.x.max() <= hi
    for name, labels in ds.attributes.items():
        assert labels.dtype == np.int64 and labels.shape == (len(ds),)
        assert 0 <= labels.min() and labels.max() < ds.num_classes[name]


# ---------------------------------------------------------------- registry


def test_registry_names():
    assert set(DATASETS) == {"digits", "ujiindoorloc", "synthetic-depth", "npz", "motionsense", "adult", "walkway"}


@pytest.mark.parametrize("call, error, words", [
    (lambda: load_dataset("mnist"), ValueError, "unknown dataset 'mnist'"),
    (lambda: load_dataset("ujiindoorloc"), ValueError, "needs path="),
    (lambda: load_dataset("ujiindoorloc", "/nonexistent/uji.zip"), FileNotFoundError, "not found"),
    (lambda: load_dataset("npz", "/nonexistent/a.npz"), FileNotFoundError, "not found"),
    (lambda: load_dataset("digits", colour=True), ValueError, "unknown option"),
    (lambda: load_dataset("digits").prior("parity", "age"), ValueError, "unknown attribute 'age'"),
])
def test_bad_input_raises_clear_message(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_uji_source_without_csvs_raises(tmp_path):
    (tmp_path / "trainingData.csv").write_text("WAP001,FLOOR\n100,0\n")
    with pytest.raises(ValueError, match="lacks.*validationData.csv"):
        load_dataset("ujiindoorloc", tmp_path)


def test_uji_csv_without_columns_raises(tmp_path):
    for name in ("trainingData.csv", "validationData.csv"):
        (tmp_path / name).write_text("WAP001,FLOOR\n100,0\n")
    with pytest.raises(ValueError, match="lacks columns"):
        load_dataset("ujiindoorloc", tmp_path)


# ---------------------------------------------------------------- digits


def test_digits_shapes_and_attributes():
    ds = load_dataset("digits")
    check_consistent(ds)
    assert ds.x.dtype == np.float32 and ds.sample_shape == (8, 8) and ds.modality == "image"
    assert ds.sensor_range == (0.0, 16.0) and not ds.synthetic
    d = ds.attributes["digit"]
    assert np.array_equal(ds.attributes["parity"], d % 2)
    assert np.array_equal(ds.attributes["lt5"], (d < 5).astype(np.int64))
    assert ds.num_classes == {"digit": 10, "parity": 2, "lt5": 2}


def test_digits_prior_is_pr_gan_theta():
    ds = load_dataset("digits")
    # rows: even / odd; columns: lt5 = 0 / 1  (theta_E, theta_O of PR-GAN)
    np.testing.assert_allclose(ds.prior("parity", "lt5"), [[0.4, 0.6], [0.6, 0.4]])
    # lt5=0 is {5..9}: three odd of five
    np.testing.assert_allclose(ds.prior("lt5", "parity"), [[0.4, 0.6], [0.6, 0.4]])
    digit_parity = ds.prior("digit", "parity")
    assert digit_parity.shape == (10, 2)
    np.testing.assert_array_equal(digit_parity[:, 1], np.arange(10) % 2)


def test_subset_keeps_rows_and_prior():
    ds = load_dataset("digits")
    idx = np.array([5, 0, 7])
    sub = ds.subset(idx)
    assert len(sub) == 3 and np.array_equal(sub.x, ds.x[idx])
    assert np.array_equal(sub.attributes["digit"], ds.attributes["digit"][idx])
    np.testing.assert_allclose(sub.prior("parity", "lt5"), ds.prior("parity", "lt5"))


# ---------------------------------------------------------------- stratified slices


def test_stratified_slices_equal_and_proportional():
    rng = np.random.default_rng(3)
    strata = rng.choice(7, size=1000, p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.07, 0.03])
    slices = stratified_slices(strata, n_slices=3, seed=1)
    assert len(slices) == 3
    assert np.array_equal(np.sort(np.concatenate(slices)), np.arange(1000))  # disjoint + cover
    sizes = [len(s) for s in slices]
    assert max(sizes) - min(sizes) <= 1
    for s in np.unique(strata):
        counts = [np.sum(strata[sl] == s) for sl in slices]
        assert max(counts) - min(counts) <= 1
    assert all(np.all(np.diff(sl) > 0) for sl in slices)
    again = stratified_slices(strata, n_slices=3, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(slices, again))
    other = stratified_slices(strata, n_slices=3, seed=2)
    assert not all(np.array_equal(a, b) for a, b in zip(slices, other))


# ---------------------------------------------------------------- ujiindoorloc


@pytest.fixture(scope="module")
def uji():
    return load_dataset("ujiindoorloc", UJI_ZIP)


@needs_uji
def test_uji_full_shapes_and_binarisation(uji):
    check_consistent(uji)
    assert len(uji) == 21048 and uji.sample_shape == (520,) and uji.x.dtype == np.uint8
    assert set(np.unique(uji.x)) == {0, 1} and uji.modality == "vector"
    assert uji.num_classes["building"] == 3 and uji.num_classes["floor"] == 13
    assert uji.num_classes["region"] == 104
    assert len(load_dataset("ujiindoorloc", UJI_ZIP, split="train")) == 19937
    assert len(load_dataset("ujiindoorloc", UJI_ZIP, split="validation")) == 1111


@needs_uji
def test_uji_regions_nest_in_floors_and_buildings(uji):
    floor, region, building = (uji.attributes[k] for k in ("floor", "region", "building"))
    assert np.array_equal(region // 8, floor)
    floor_building = np.repeat([0, 1, 2], [4, 4, 5])
    assert np.array_equal(floor_building[floor], building)
    counts = np.bincount(region, minlength=104).reshape(13, 8)
    assert (counts > 0).all()
    # about equal: no region below half or above double its floor's mean
    mean = counts.mean(axis=1, keepdims=True)
    assert (counts > 0.5 * mean).all() and (counts < 2 * mean).all()


@needs_uji
def test_uji_labels_do_not_depend_on_subset(uji):
    val = load_dataset("ujiindoorloc", UJI_ZIP, split="validation")
    for k in ("floor", "region", "space", "phone"):
        assert np.array_equal(val.attributes[k], uji.attributes[k][-1111:])
    small = load_dataset("ujiindoorloc", UJI_ZIP, max_rows=500)
    assert len(small) == 500
    assert np.unique(small.attributes["region"]).size == 104


@needs_uji
def test_uji_priors(uji):
    theta = uji.prior("floor", "region")
    assert theta.shape == (13, 104)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert ((theta > 0).sum(axis=1) == 8).all()
    assert np.array_equal(np.flatnonzero(theta[5]), np.arange(40, 48))
    fb = uji.prior("floor", "building")
    np.testing.assert_array_equal(fb.argmax(axis=1), np.repeat([0, 1, 2], [4, 4, 5]))
    bf = uji.prior("building", "floor")
    assert np.isnan(bf[2, 8:]).all() and (bf[2, :8] == 0).all()
    assert uji.prior("user", "phone") is None


# ---------------------------------------------------------------- synthetic depth


@pytest.fixture(scope="module")
def depth():
    return load_dataset("synthetic-depth", n_identities=4, samples_per_class=30, seed=0)


def test_depth_shapes_labels_and_determinism(depth):
    check_consistent(depth)
    assert depth.synthetic and "synthetic" in depth.description.lower()
    assert depth.x.dtype == np.uint16 and depth.sample_shape == (180, 180) and depth.modality == "depth"
    assert depth.sensor_range == (0.0, 4500.0)
    assert np.bincount(depth.attributes["identity"]).tolist() == [60] * 4
    again = load_dataset("synthetic-depth", n_identities=4, samples_per_class=30, seed=0)
    assert np.array_equal(depth.x, again.x)
    other = load_dataset("synthetic-depth", n_identities=4, samples_per_class=30, seed=1)
    assert not np.array_equal(depth.x, other.x)
    # floor far, person nearer, and Kinect-like invalid pixels present
    assert 2500 < np.median(depth.x[:, :10, :10][depth.x[:, :10, :10] > 0]) < 3100
    assert (depth.x[:, 80:100, 80:100].min(axis=(1, 2)) < 2000).all()
    assert 0 < np.mean(depth.x == 0) < 0.05
    np.testing.assert_allclose(depth.prior("facing", "identity"), np.full((2, 4), 0.25))
    np.testing.assert_allclose(depth.prior("identity", "facing"), np.full((4, 2), 0.5))


@pytest.mark.parametrize("attribute", ["facing", "identity"])
def test_depth_attributes_learnable(depth, attribute):
    from sklearn.linear_model import LogisticRegression

    x = depth.x.astype(np.float32).reshape(len(depth), 15, 12, 15, 12).mean(axis=(2, 4))
    x = x.reshape(len(depth), -1) / 4500.0
    y = depth.attributes[attribute]
    strata = depth.attributes["identity"] * 2 + depth.attributes["facing"]
    train, test = stratified_slices(strata, n_slices=2, seed=0)
    acc = LogisticRegression(max_iter=300).fit(x[train], y[train]).score(x[test], y[test])
    chance = 1.0 / depth.num_classes[attribute]
    assert acc > chance + 0.2, f"{attribute}: accuracy {acc:.2f} vs chance {chance:.2f}"


def test_depth_identities_differ_as_adults_do():
    """20 default identities; stature in the adult range and correlated with shoulder breadth."""
    people = make_identities(seed=0)
    assert len(people) == 20
    height = np.array([p.height for p in people])
    shoulders = np.array([p.shoulder_width for p in people])
    assert 1.40 < height.min() and height.max() < 2.10 and height.std() > 0.05
    assert np.corrcoef(height, shoulders)[0, 1] > 0.3


def test_depth_identity_readable_from_body_shape():
    """Who it is shows in the frame's depth profile (head height, shoulder area): trees on a depth
    histogram tell 20 people apart; the frames of one person still vary (pose, stride, noise)."""
    from sklearn.ensemble import ExtraTreesClassifier
    data = load_dataset("synthetic-depth", samples_per_class=20, seed=3)
    valid = [frame[frame > 0] for frame in data.x]
    features = np.array(
        [
            np.r_[np.percentile(v, [0.5, 1, 2, 5, 10, 20, 30]), [np.mean(v < t) for t in range(1000, 2800, 50)]]
            for v in valid
        ]
    )
    z = data.attributes["identity"]
    train, test = stratified_slices(z * 2 + data.attributes["facing"], n_slices=2, seed=0)
    accuracy = ExtraTreesClassifier(300, random_state=0).fit(features[train], z[train]).score(features[test], z[test])
    assert accuracy > 0.8, accuracy  # chance: 0.05
    same_person = data.x[z == 0].astype(np.float32)
    assert np.abs(same_person[0] - same_person[1]).mean() > 5.0  # not one frame repeated


def test_full_frame_rendering():
    params = make_identities(3, seed=0)
    rng = np.random.default_rng(0)
    frame = render_depth_frame(params[0], 1, rng, center=(200, 300))
    assert frame.shape == (424, 512) and frame.dtype == np.uint16
    near = np.argwhere((frame > 0) & (frame < 2000))  # the person
    assert np.abs(near.mean(axis=0) - (200, 300)).max() < 30
    frames = list(synthetic_depth_frames(3, seed=0, n_identities=3))
    assert len(frames) == 3 and all(f.shape == (424, 512) for f, _, _ in frames)
    assert all(0 <= i < 3 and s in (0, 1) for _, i, s in frames)
    with pytest.raises(ValueError, match="facing"):
        render_depth_frame(params[0], 2, rng)


# ---------------------------------------------------------------- npz


def test_npz_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, size=(20, 4, 5)).astype(np.uint8)
    colour, size = rng.integers(0, 3, 20), rng.integers(0, 2, 20)
    path = tmp_path / "toy.npz"
    np.savez(path, x=x, colour=colour, size=size, sensor_min=0, sensor_max=255)
    ds = load_dataset("npz", path)
    check_consistent(ds)
    assert np.array_equal(ds.x, x) and ds.x.dtype == np.uint8 and ds.modality == "image"
    assert np.array_equal(ds.attributes["colour"], colour) and ds.sensor_range == (0.0, 255.0)
    assert ds.num_classes["size"] == 2 and ds.prior("colour", "size") is None
    np.savez(path, x=x.reshape(20, -1).astype(np.float32), colour=colour, modality="depth")
    ds = load_dataset("npz", path)
    assert ds.modality == "depth" and ds.sensor_range == (float(x.min()), float(x.max()))


def test_npz_bad_attribute_raises(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, x=np.zeros((4, 3)), colour=np.array([0.5, 1, 2, 3]))
    with pytest.raises(ValueError, match="attribute 'colour' must be non-negative integers"):
        load_dataset("npz", path)
    np.savez(path, y=np.zeros(4))
    with pytest.raises(ValueError, match="no array 'x'"):
        load_dataset("npz", path)


# ---------------------------------------------------------------- ujiindoorloc: validationData as the test split

UJI_TRAIN_ROWS = 19937


def digest(rows) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(rows, dtype=np.int64).tobytes()).hexdigest()[:16]


def uji_splits(data, seed: int = 0) -> dict:
    """Every split a run draws: the protocol's slices (PR-GAN and the mechanisms on protocol_task) and
    PASS's (train, test) rows."""
    from sensorveil.sdk.evaluation import dataset_slices
    from sensorveil.sdk.mechanisms.pass_parts.data import split_rows
    slices = dataset_slices(data, "floor", "region", seed)
    pass_train, pass_test = split_rows(data, "floor", "region", seed)
    return {**slices, "pass_train": pass_train, "pass_test": pass_test}


@needs_uji
def test_uji_validation_test_split_scores_on_validation_rows(uji):
    data = load_dataset("ujiindoorloc", UJI_ZIP, test_split="validation")
    check_consistent(data)
    validation = np.arange(UJI_TRAIN_ROWS, len(uji))
    assert np.array_equal(data.x, uji.x) and np.array_equal(data.test_rows, validation)
    assert np.array_equal(data.attributes["trial_split"], np.repeat([0, 1], [UJI_TRAIN_ROWS, 1111]))
    splits = uji_splits(data)
    assert np.array_equal(splits["test"], validation) and np.array_equal(splits["pass_test"], validation)
    for name in ("classifiers", "generator_train", "generator_val", "pass_train"):
        assert splits[name].max() < UJI_TRAIN_ROWS, f"{name} holds validation rows"
    learned = np.concatenate([splits["classifiers"], splits["generator_train"], splits["generator_val"]])
    assert np.array_equal(np.sort(learned), np.arange(UJI_TRAIN_ROWS))
    assert "validationData" in data.description and uji.test_rows is None


@needs_uji
def test_uji_default_split_is_unchanged():
    """Digests of what the loader and the slices gave before test_split existed (max_rows=600, seed 0)."""
    for options in ({}, {"test_split": "random"}):
        data = load_dataset("ujiindoorloc", UJI_ZIP, max_rows=600, **options)
        assert set(data.attributes) == {"building", "floor", "region", "space", "user", "phone"}
        assert data.test_rows is None and digest(data.attributes["region"]) == "c32fd47223955788"
        assert digest(data.x.reshape(len(data), -1).sum(1)) == "01384a5a1a50d734"
        splits = uji_splits(data)
        assert digest(splits["test"]) == digest(splits["pass_test"]) == "3b86c76487d54ee6"
        assert digest(splits["classifiers"]) == "84e9021672a4f838"
        assert digest(splits["generator_train"]) == "6bbc6359ad6eab40"
        assert digest(splits["pass_train"]) == "6b5e59a1f0ee8287"


@needs_uji
def test_uji_validation_test_split_with_max_rows(uji):
    data = load_dataset("ujiindoorloc", UJI_ZIP, test_split="validation", max_rows=600)
    split = data.attributes["trial_split"]
    assert len(data) == 600 and split.sum() == round(600 * 1111 / len(uji)) == 32
    assert np.array_equal(uji_splits(data)["test"], np.flatnonzero(split == 1))
    # each part is a region-stratified subset of its own CSV
    train = load_dataset("ujiindoorloc", UJI_ZIP, split="train").attributes["region"]
    assert np.unique(data.attributes["region"][split == 0]).size == 104 > np.unique(train[:568]).size
    assert np.unique(data.attributes["floor"][split == 1]).size >= 10


@needs_uji
@pytest.mark.parametrize("options, words", [
    ({"test_split": "valid"}, r"test_split='valid' is unknown; expected one of \['random', 'validation', 'held-out-"),
    ({"test_split": "held-out-users"}, r"test_split='held-out-users' needs split='train' \(its train and test rows"),
    ({"test_split": "held-out-users", "split": "train", "max_rows": 1}, "max_rows=1 with test_split='held-out-users'"),
    ({"test_split": "validation", "split": "train"}, "test_split='validation' needs split='both'"),
    ({"test_split": "validation", "split": "validation"}, "needs split='both'"),
    ({"test_split": "validation", "max_rows": 1}, "max_rows=1 with test_split='validation': expected 2 or more"),
    ({"max_rows": "many"}, "option max_rows='many': expected a whole number"),
])
def test_uji_test_split_fails_closed(options, words):
    with pytest.raises(ValueError, match=words):
        load_dataset("ujiindoorloc", UJI_ZIP, **options)


@pytest.mark.trains
def test_uji_test_split_options_from_the_cli(uji_zip):
    """--dataset-option KEY=VALUE arrives as text; the registry converts it to the loader's types."""
    from sensorveil.cli import build_parser
    from sensorveil.cli.train import dataset_options
    args = build_parser().parse_args(["train", "pass", "--dataset", "ujiindoorloc", "--data-path", str(uji_zip),
                                      "--dataset-option", "test_split=validation", "max_rows=600"])
    options = dataset_options(args.dataset_option)
    assert options == {"test_split": "validation", "max_rows": "600"}
    data = load_dataset("ujiindoorloc", uji_zip, **options)
    assert len(data) == 600 and len(data.test_rows) == 32
    with pytest.raises(ValueError, match="--dataset-option takes KEY=VALUE"):
        dataset_options(["test_split"])


@pytest.mark.trains
def test_uji_test_split_survives_run_reload(tmp_path, uji_zip):
    from sensorveil.sdk.rundir import load_recorded_dataset, read_run
    from tests.conftest import tiny_run
    options = {"test_split": "validation", "max_rows": "600"}
    run = read_run(tiny_run(tmp_path / "run", "ujiindoorloc", data_path=str(uji_zip), dataset_options=options))
    assert run["dataset"]["options"] == options
    assert run["metrics"]["n_test"] == 32 and run["metrics"]["n_attacker_train"] == 568
    again, direct = load_recorded_dataset(run["dataset"]), load_dataset("ujiindoorloc", uji_zip, **options)
    assert np.array_equal(again.x, direct.x) and np.array_equal(again.test_rows, direct.test_rows)
    assert all(np.array_equal(again.attributes[k], v) for k, v in direct.attributes.items())
