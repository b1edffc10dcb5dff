"""The whole manifest validated at load: every bad value is one BundleError naming its field
and what was expected, never KeyError/TypeError/RecursionError or a silently wrong output."""
from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sensorveil.runtime import BundleError, ManifestError, Privatizer

FIXTURES = Path(__file__).parents[1] / "fixtures"


def load_with(bundle, tmp_path, change=None, text=None):
    """Load a copy of ``bundle`` whose manifest was changed by ``change`` (or replaced by ``text``)."""
    target = tmp_path / "bundle"
    if not target.exists():
        shutil.copytree(bundle, target)
    path = target / "manifest.json"
    if text is None:
        manifest = json.loads((Path(bundle) / "manifest.json").read_text())
        change(manifest)
        text = json.dumps(manifest)
    path.write_text(text)
    return Privatizer.load(target)


def set_at(path, value):
    def change(manifest):
        *parents, last = path
        node = manifest
        for key in parents:
            node = node[key]
        node[last] = value
    return change


# the manifest edits, and the wrong types that surfaced as KeyError/TypeError/...
@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("input", "normalization", "scale"), 0, "input.normalization.scale is 0; expected a finite positive number"),
        (("input", "normalization", "scale"), math.nan, "input.normalization.scale is nan"),
        (("output", "normalization", "scale"), -16.0, "output.normalization.scale is -16.0"),
        (("input", "normalization", "offset"), math.inf, "input.normalization.offset is inf"),
        (("output", "dtype"), "object", "output.dtype is 'object'; expected one of"),
        (("input", "dtype"), ["float32"], "input.dtype is a list of 1 item(s)"),
        (("input", "sample_shape"), [-8, 8], "input.sample_shape[0] is -8; expected an integer from 1"),
        (("output", "sample_shape"), [2**33, 8], "output.sample_shape[0] is 8589934592"),
        (("input", "sample_shape"), [8, 8.0], "input.sample_shape[1] is 8.0"),
        (
            ("input", "sample_shape"),
            [65],
            "input.model_shape is a list of 4 item(s); expected as many values per sample",
        ),
        (("input", "model_shape"), [None, 1, 8, True], "input.model_shape[3] is True"),
        (
            ("input", "sensor_range"),
            [16.0, 0.0],
            "input.sensor_range is a list of 2 item(s); expected [low, high] with low < high",
        ),
        (("input", "sensor_range"), [0.0], "input.sensor_range is a list of 1 item(s)"),
        (("input", "sensor_range"), "0-16", "input.sensor_range is '0-16'"),
        (("input", "normalization"), [0, 16], "input.normalization is a list of 2 item(s); expected an object"),
        (("input",), [], "input is a list of 0 item(s); expected an object"),
        (("mechanism",), "prgan", "mechanism is 'prgan'; expected an object"),
        (("files",), [], "files is a list of 0 item(s); expected an object"),
        (("files", "model.onnx", "sha256"), 12, "files['model.onnx'].sha256 is 12; expected 64 lowercase hex digits"),
        (("files", "model.onnx", "size"), "40771", "files['model.onnx'].size is '40771'"),
        (("artifacts", "onnxruntime", "graphs", "model"), ["model.onnx"], "file a list of 1 item(s) is not listed"),
        (("artifacts", "onnxruntime", "graphs", "model", "file"), {"nested": 1}, "is not listed in 'files'"),
        (("artifacts", "onnxruntime", "precision"), "fp64", "artifacts.onnxruntime.precision is 'fp64'"),
        (("pipeline",), {"kind": "model"}, "non-empty list of stages"),
        (("pipeline",), [{"kind": "model", "graph": ["model"]}], "pipeline[0].graph is a list of 1 item(s)"),
        (("schema_version",), "2", "schema_version '2' is not supported"),
        (("schema_version",), True, "schema_version True is not supported"),
    ],
)
@pytest.mark.exports
@pytest.mark.trains
def test_bad_manifest_field_is_one_error_naming_the_field(digits_bundle, tmp_path, path, value, fragment):
    with pytest.raises(ManifestError) as error:
        load_with(digits_bundle, tmp_path, set_at(path, value))
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("mechanism", "substitution", "bank_size"), [64], "pipeline[1].bank_size is a list of 1 item(s)"),
        (("mechanism", "substitution", "bank_size"), 0, "pipeline[1].bank_size is 0"),
        (
            ("mechanism", "substitution", "bank_indices"),
            "nowhere.npy",
            "pipeline[1].bank_indices names file 'nowhere.npy'",
        ),
        (("mechanism", "substitution", "output_default"), None, "pipeline[1].output_default is None"),
        (("mechanism", "substitution"), "bank", "mechanism.substitution is 'bank'; expected an object"),
    ],
)
def test_schema1_stage_fields_are_validated_too(tmp_path, path, value, fragment):
    with pytest.raises(ManifestError) as error:
        load_with(FIXTURES / "schema1-pass-digits-onnx", tmp_path, set_at(path, value))
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[" * 100000 + "]" * 100000, "not valid JSON"),  # RecursionError in the parser
        ('{"schema_version": 1' + "0" * 5000 + "}", "not valid JSON"),  # more digits than int() takes
        ('{"schema_version": 2, "input": ' + '{"a": ' * 5000 + "1" + "}" * 5001, "not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
@pytest.mark.exports
@pytest.mark.trains
def test_json_that_python_cannot_take_is_a_bundle_error(digits_bundle, tmp_path, text, fragment):
    with pytest.raises(BundleError, match=fragment):
        load_with(digits_bundle, tmp_path, text=text)


# -- the model itself against the manifest ---------------------------------------------------------------
@pytest.mark.parametrize(
    "change, fragment",
    [
        (set_at(("input", "name"), "pixels"), "names its input 'x'; the manifest expects 'pixels'"),
        (set_at(("output", "name"), "z"), "names its output 'y'; the manifest expects 'z'"),
        (
            lambda m: m["input"].update(sample_shape=[64], model_shape=[None, 64]),
            "has input shape [None, 1, 8, 8]; the manifest expects (batch, 64)",
        ),
        (
            lambda m: m["output"].update(sample_shape=[4, 16], model_shape=[None, 1, 4, 16]),
            "has output shape [None, 1, 8, 8]; the manifest expects (batch, 1, 4, 16)",
        ),
    ],
)
@pytest.mark.exports
@pytest.mark.trains
def test_model_inputs_and_outputs_are_checked_against_the_manifest(digits_bundle, tmp_path, change, fragment):
    with pytest.raises(ManifestError) as error:
        load_with(digits_bundle, tmp_path, change)
    assert fragment in str(error.value)


def test_substitution_model_must_score_the_whole_bank(tmp_path):
    def shrink_bank(manifest):
        manifest["mechanism"]["substitution"]["bank_size"] = 32

    with pytest.raises(ManifestError, match=r"output shape \[None, 64\]; the manifest expects \(batch, 32\)"):
        load_with(FIXTURES / "schema1-pass-digits-onnx", tmp_path, shrink_bank)


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_cli_reports_a_bad_manifest_in_one_line_and_exits_2(digits_bundle, tmp_path):
    target = tmp_path / "bundle"
    shutil.copytree(digits_bundle, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["output"]["normalization"]["scale"] = math.nan
    (target / "manifest.json").write_text(json.dumps(manifest))
    result = subprocess.run(
        [sys.executable, "-m", "sensorveil", "run", str(target), "--source", "synthetic-depth", "--frames", "2"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "output.normalization.scale is nan; expected a finite positive number" in result.stderr


# -- property: whatever a manifest holds, only BundleError escapes the loader -----------------------------
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["model.onnx", "float32", "object", "model", "substitution", "sample", "fp32", "x", "y"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def paths_of(node, prefix=()):
    """Every key path in a JSON tree, so a mutation can land anywhere, nested fields included."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths_of(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths_of(value, prefix + (index,))


@st.composite
def mutated_manifests(draw, manifest):
    manifest = copy.deepcopy(manifest)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(sorted(paths_of(manifest), key=repr)))
        if not path:
            continue
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        operation = draw(st.sampled_from(["delete", "replace", "wrap in list", "wrap in object", "duplicate"]))
        if operation == "delete":
            del parent[path[-1]]
        elif operation == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        elif operation == "wrap in list":
            parent[path[-1]] = [parent[path[-1]]]
        elif operation == "wrap in object":
            parent[path[-1]] = {"value": parent[path[-1]]}
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=20))] = parent[path[-1]]
    return manifest


def only_bundle_errors_escape(bundle, folder, manifest):
    (folder / "manifest.json").write_text(json.dumps(manifest))
    try:
        p = Privatizer.load(folder)
    except BundleError:
        return
    y = p(np.full(p.input_spec.sample_shape, p.input_spec.low, dtype=p.input_spec.dtype))
    assert np.asarray(y).dtype.kind in "uif"


@pytest.mark.parametrize("seed_bundle", ["digits_bundle", "schema1-pass-digits-onnx"])
def test_mutated_manifests_raise_only_bundle_errors(seed_bundle, request, tmp_path_factory):
    bundle = request.getfixturevalue(seed_bundle) if seed_bundle == "digits_bundle" else FIXTURES / seed_bundle
    folder = tmp_path_factory.mktemp("mutated") / "bundle"
    shutil.copytree(bundle, folder)
    original = json.loads((Path(bundle) / "manifest.json").read_text())

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated_manifests(original))
    def check(manifest):
        only_bundle_errors_escape(bundle, folder, manifest)

    check()
