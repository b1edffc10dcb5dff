"""Fail closed: a value the runtime accepts must still protect. Each reproduction of the hostile
probe (values that passed validation yet switched a mechanism off, or made the output garbage) is refused
at load with one BundleError naming the field, or at the call with an OutputError, never released."""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime import BundleError, ManifestError, OutputError, Privatizer

FIXTURES = Path(__file__).parents[1] / "fixtures"
PASS_BUNDLE = FIXTURES / "schema1-pass-digits-onnx"


def copy_bundle(bundle, tmp_path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(bundle, target)
    return target


def edit_manifest(bundle: Path, change) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def replace_array(bundle: Path, name: str, array) -> None:
    """Write ``array`` as the bundle's ``name`` and re-list it with its new sha256, as an attacker who can
    edit an unsigned bundle would: only the runtime's own checks stand in the way."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    data = buffer.getvalue()
    (bundle / name).write_bytes(data)
    edit_manifest(bundle, lambda m: m["files"].__setitem__(
        name, {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}))


def stage_entry(manifest: dict, kind: str) -> dict:
    return next(stage for stage in manifest["pipeline"] if stage["kind"] == kind)


@pytest.fixture(scope="module")
def obfuscation_bundle(tmp_path_factory) -> Path:
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run = train_run("sanitizer", "digits", out=tmp_path_factory.mktemp("runs") / "sanitizer", attacker_epochs=1,
                    epochs=2, settings={"mechanism": "obfuscation"})
    return export_run(run, "onnx", tmp_path_factory.mktemp("bundles") / "sanitizer")


@pytest.fixture(scope="module")
def attriguard_bundle(tmp_path_factory) -> Path:
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run = train_run("attriguard", "digits", out=tmp_path_factory.mktemp("runs") / "attriguard", attacker_epochs=1,
                    settings={"beta": "1.0"})
    return export_run(run, "onnx", tmp_path_factory.mktemp("bundles") / "attriguard")


# -- Sanitizer: no accepted value may release the raw latent ------------------------------------------
@pytest.mark.parametrize("change, fragment", [
    ({"laplace_scale": 0}, "laplace_scale is 0; expected a finite positive number"),
    ({"laplace_scale": -1}, "laplace_scale is -1; expected a finite positive number"),
    ({"clip_norm": 1e308, "laplace_scale": 1e-300}, "clip_norm is 1e+308; expected a clip norm"),
    ({"laplace_scale": 1e-3}, "laplace_scale is 0.001; expected at least"),
    ({"sensitive_dim": 0}, "sensitive_dim is 0; expected an integer from 1"),
    ({"mechanism": "none"}, "mechanism is 'none'; expected one of"),
])
@pytest.mark.exports
@pytest.mark.trains
def test_sanitizer_values_that_switch_privacy_off_are_refused(obfuscation_bundle, tmp_path, change, fragment):
    bundle = copy_bundle(obfuscation_bundle, tmp_path)
    edit_manifest(bundle, lambda m: stage_entry(m, "sanitizer").update(change))
    with pytest.raises(ManifestError, match="pipeline\\[\\d\\]") as error:
        Privatizer.load(bundle)
    assert fragment in str(error.value)


@pytest.mark.exports
@pytest.mark.trains
def test_sanitizer_bundle_as_exported_still_loads_and_noises(obfuscation_bundle):
    p = Privatizer.load(obfuscation_bundle, seed=0)
    x = np.full(p.input_spec.sample_shape, 8.0, dtype=np.float32)
    assert not np.array_equal(p(x), p(x))


# -- AttriGuard: tau, target and weights ---------------------------------------------------------------
@pytest.mark.parametrize("tau", [0, -0.5, 2.0])
@pytest.mark.exports
@pytest.mark.trains
def test_attriguard_step_outside_0_1_is_refused(attriguard_bundle, tmp_path, tau):
    bundle = copy_bundle(attriguard_bundle, tmp_path)
    edit_manifest(bundle, lambda m: stage_entry(m, "attriguard").update(tau=tau))
    with pytest.raises(ManifestError, match=r"tau is .*; expected a step in \(0, 1\]"):
        Privatizer.load(bundle)


@pytest.mark.parametrize("values", ["zeros", "nan", "negative"])
@pytest.mark.exports
@pytest.mark.trains
def test_attriguard_target_that_is_no_distribution_is_refused(attriguard_bundle, tmp_path, values):
    bundle = copy_bundle(attriguard_bundle, tmp_path)
    name = stage_entry(json.loads((bundle / "manifest.json").read_text()), "attriguard")["target"]
    target = np.load(bundle / name)
    bad = {"zeros": np.zeros_like(target), "nan": np.full_like(target, np.nan),
           "negative": target - 1.0}[values]
    replace_array(bundle, name, bad)
    with pytest.raises(BundleError, match="attriguard target .*expected a distribution"):
        Privatizer.load(bundle)


# -- PASS: the substitutes are what leaves the device ----------------------------------------------------
@pytest.mark.parametrize("bad, fragment", [
    (lambda s: s[:, :4], "expected float32 (64, 8, 8)"),
    (lambda s: s.astype(np.int64), "expected float32 (64, 8, 8)"),
    (lambda s: s > 8, "expected float32 (64, 8, 8)"),
    (lambda s: np.where(s > 8, np.nan, s).astype(np.float32), "NaN or inf"),
    (lambda s: (s * 1e6).astype(np.float32), "inside the output's sensor range"),
])
def test_pass_substitutes_of_the_wrong_kind_are_refused(tmp_path, bad, fragment):
    bundle = copy_bundle(PASS_BUNDLE, tmp_path)
    replace_array(bundle, "substitutes.npy", bad(np.load(bundle / "substitutes.npy")))
    with pytest.raises(BundleError) as error:
        Privatizer.load(bundle)
    assert fragment in str(error.value)


@pytest.mark.parametrize("value", ["logit", "", 7])
def test_pass_unknown_model_output_is_refused(tmp_path, value):
    bundle = copy_bundle(PASS_BUNDLE, tmp_path)
    edit_manifest(bundle, lambda m: m["mechanism"]["substitution"].update(model_output=value))
    with pytest.raises(ManifestError, match="model_output"):
        Privatizer.load(bundle)


def test_pass_graph_that_returns_no_probabilities_is_not_drawn_from(tmp_path):
    """A probabilities bundle whose graph is said to return P(X'|X) but returns scores (what removing
    "model_output": "logits" from a logits bundle does) is refused at the call, not drawn from."""
    bundle = copy_bundle(PASS_BUNDLE, tmp_path)
    p = Privatizer.load(bundle)
    p.pipeline.graphs["model"].run = lambda batch: np.full((len(batch), 64), 3.0, dtype=np.float32)
    with pytest.raises(OutputError, match="not probabilities"):
        p(np.zeros((8, 8), np.float32))


# -- numbers the runtime can use --------------------------------------------------------------------------
@pytest.mark.parametrize("key, value", [("scale", 1e-300), ("scale", 1e-45), ("scale", 1e39),
                                        ("offset", 1e39), ("offset", -1e39), ("scale", 1e-9)])
def test_normalization_that_float32_cannot_carry_is_refused(tmp_path, key, value):
    bundle = copy_bundle(FIXTURES / "schema1-prgan-digits-onnx", tmp_path)
    edit_manifest(bundle, lambda m: m["input"]["normalization"].update({key: value}))
    with pytest.raises(ManifestError, match="input.normalization"):
        Privatizer.load(bundle)


def test_output_that_is_not_finite_is_never_released(tmp_path):
    p = Privatizer.load(FIXTURES / "schema1-prgan-digits-onnx")
    p.pipeline.graphs["model"].run = lambda batch: np.full(batch.shape, math.nan, dtype=np.float32)
    with pytest.raises(OutputError, match="NaN/inf"):
        p(np.zeros((8, 8), np.float32))


# -- only the bundle's bytes -------------------------------------------------------------------------------
def relist(bundle: Path, name: str) -> None:
    data = (bundle / name).read_bytes()
    edit_manifest(bundle, lambda m: m["files"].__setitem__(
        name, {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}))


def test_onnx_with_external_data_is_refused(tmp_path, monkeypatch):
    """onnxruntime reads a relative external-data location from the working directory even when the model
    comes as bytes: the weights there were never hashed or signed."""
    import onnx
    from onnx.external_data_helper import convert_model_to_external_data
    bundle = copy_bundle(FIXTURES / "schema1-prgan-digits-onnx", tmp_path)
    model = onnx.load(str(bundle / "model.onnx"))
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    onnx.save_model(model, str(workdir / "model.onnx"))      # writes weights.bin beside it
    shutil.copy(workdir / "model.onnx", bundle / "model.onnx")
    relist(bundle, "model.onnx")
    monkeypatch.chdir(workdir)
    with pytest.raises(BundleError, match="model.onnx stores tensors as external data"):
        Privatizer.load(bundle)


def test_self_contained_models_pass_the_scan():
    from sensorveil.runtime.onnx_scan import references_external_data
    for name in ("schema1-prgan-digits-onnx", "schema1-pass-digits-onnx"):
        assert not references_external_data((FIXTURES / name / "model.onnx").read_bytes())


@pytest.mark.parametrize("name", ["manifest.sig", "model.onnx", "manifest.json"])
@pytest.mark.boots
def test_a_fifo_in_the_bundle_is_refused_not_waited_on(tmp_path, name):
    import subprocess
    import sys
    bundle = copy_bundle(FIXTURES / "schema1-prgan-digits-onnx", tmp_path)
    path = bundle / name
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    code = ("import sys\nfrom sensorveil.runtime import BundleError, Privatizer\n"
            "try:\n    Privatizer.load(sys.argv[1])\nexcept BundleError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code, str(bundle)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout


# -- the CLI and the trainer check every number before any work starts ------------------------------------
@pytest.mark.parametrize("argv, fragment", [
    (["train", "prgan", "--dataset", "digits", "--set", "epochs=-5"], "setting epochs=-5: expected 1 or more"),
    (["train", "prgan", "--dataset", "digits", "--set", "lr_generator=nan"], "lr_generator=nan: expected a finite"),
    (["train", "prgan", "--dataset", "digits", "--set", "lr_generator=0"], "expected a learning rate above 0"),
    (["train", "prgan", "--dataset", "digits", "--private", "parity", "--useful", "parity"],
     "['parity'] are both useful (or hidden) and private"),
    (["train", "attriguard", "--dataset", "digits", "--private", "digit", "lt5"], "attriguard takes one private"),
])
def test_bad_training_values_are_one_error_before_training(tmp_path, capsys, argv, fragment):
    from sensorveil.cli import main
    assert main(argv + ["--out", str(tmp_path / "run")]) == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize("value", ["nan", "-0.1", "1.5", "inf"])
def test_max_bad_share_outside_0_1_is_a_usage_error(value, capsys):
    from sensorveil.cli import main
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(PASS_BUNDLE), "--source", "synthetic-depth", "--max-bad-share", value])
    assert exit_.value.code == 2 and "expected a number from 0 to 1" in capsys.readouterr().err


def test_int8_calibration_uses_the_samples_asked_for_and_says_so(capsys):
    """--calibration N calibrates on N samples with a progress line per chunk (the quantizer's own bar
    counted samples x operators and read as 14x the samples)."""
    pytest.importorskip("ai_edge_quantizer")
    from sensorveil.export.tflite_export import calibrate

    class Recorder:
        seen = 0

        def calibrate(self, data, previous_calibration_result=None, num_threads=None):
            (rows,) = data.values()
            self.seen += len(rows)
            return {"after": self.seen}
    recorder = Recorder()
    lines = []
    result = calibrate(recorder, "serving_default", "x", np.zeros((120, 8, 8), np.float32), log=lines.append)
    assert recorder.seen == 120 and result == {"after": 120}
    assert lines[-1] == "int8 calibration: 120 of 120 samples" and len(lines) == 3


# -- the units flag and the normalization must fit the graph: the bundle's self-test ------------------------
def model_stage(manifest: dict) -> dict:
    return manifest["pipeline"][0]


@pytest.fixture(scope="module")
def model_units_bundle(digits_run, tmp_path_factory) -> Path:
    from sensorveil.export import export_run
    return export_run(digits_run, "onnx", tmp_path_factory.mktemp("bundles") / "model-units", sensor_units=False)


@pytest.mark.exports
@pytest.mark.trains
def test_a_one_model_bundle_records_its_self_test_and_passes_it(digits_bundle):
    manifest = json.loads((Path(digits_bundle) / "manifest.json").read_text())
    assert manifest["self_test"]["samples"] == 8 and model_stage(manifest)["units"] == "sensor"
    Privatizer.load(digits_bundle)


@pytest.mark.parametrize("which, change", [
    ("sensor", lambda m: model_stage(m).update(units="model")),       # the graph's own mapping run twice
    ("model", lambda m: model_stage(m).update(units="sensor")),       # output left in model units
    ("model", lambda m: m["output"]["normalization"].update(scale=8.0)),   # a scale that is not the graph's
])
@pytest.mark.exports
@pytest.mark.trains
def test_units_or_normalization_that_do_not_fit_the_graph_are_refused(digits_bundle, model_units_bundle, tmp_path,
                                                                      which, change):
    bundle = copy_bundle(digits_bundle if which == "sensor" else model_units_bundle, tmp_path)
    edit_manifest(bundle, change)
    with pytest.raises(BundleError, match="self-test failed"):
        Privatizer.load(bundle)


@pytest.mark.exports
@pytest.mark.trains
def test_a_self_test_entry_is_validated(digits_bundle, tmp_path):
    bundle = copy_bundle(digits_bundle, tmp_path)
    edit_manifest(bundle, lambda m: m["self_test"].update(max_mean_error=5))
    with pytest.raises(BundleError, match="self_test.max_mean_error is 5"):
        Privatizer.load(bundle)


@pytest.mark.exports
@pytest.mark.trains
def test_a_scene_still_is_refused_where_it_would_change_nothing_or_is_not_a_picture(digits_bundle, tmp_path, capsys):
    """--scene-still / Privatizer(scene_still=) sets where a camera bundle's released scene starts; on a bundle
    that releases no scene it would do nothing, and a file that is no picture must not fall back to grey unsaid."""
    from sensorveil.cli import main
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.errors import InputError
    with pytest.raises(InputError, match="scene_still applies to camera bundles that release a scene"):
        Privatizer.load(digits_bundle, scene_still=np.zeros((8, 8), np.uint8))
    not_a_picture = tmp_path / "still.png"
    not_a_picture.write_text("no pixels here")
    assert main(["run", str(digits_bundle), "--source", "synthetic-depth", "--frames", "1",
                 "--scene-still", str(not_a_picture)]) == 2
    assert f"--scene-still {not_a_picture}: not an image file OpenCV can read" in capsys.readouterr().err
    from sensorveil.runtime.camera.scene import starting_scene
    with pytest.raises(InputError, match="scene_still of dtype float64"):
        starting_scene((4, 4), np.zeros((4, 4)))
    assert (starting_scene((4, 4), np.full((4, 4, 3), 90, np.uint8)) == 90).all()   # colour still, grey camera
