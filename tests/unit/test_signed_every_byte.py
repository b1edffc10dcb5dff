"""Signed means every byte: an unusable SENSORVEIL_TRUSTED_KEYS is an error, and a TensorRT
bundle's engines/ holds only engines the runtime built and recorded; anything else is refused before TensorRT
is imported (TensorRT is not needed to run these)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sensorveil.runtime import BundleError, Privatizer, engine_cache
from sensorveil.runtime.bundle import open_bundle
from sensorveil.runtime.trust import TrustError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "schema1-prgan-digits-onnx"


@pytest.mark.parametrize("setting", [":", "   ", "", " : "])
def test_a_trusted_keys_setting_that_names_no_key_is_an_error(monkeypatch, setting):
    monkeypatch.setenv("SENSORVEIL_TRUSTED_KEYS", setting)
    with pytest.raises(TrustError, match="SENSORVEIL_TRUSTED_KEYS=.* names no key"):
        Privatizer.load(FIXTURE)


def test_an_unset_trusted_keys_setting_still_loads(monkeypatch):
    monkeypatch.delenv("SENSORVEIL_TRUSTED_KEYS", raising=False)
    assert Privatizer.load(FIXTURE).signature["status"] == "unsigned"


@pytest.fixture()
def trt_bundle(tmp_path, monkeypatch) -> Path:
    """The fixture bundle with a tensorrt artifact (the ONNX graph TensorRT builds from), as an export writes it;
    signed when the test asks, so the engine cache is the only unsigned thing in it."""
    monkeypatch.delenv("SENSORVEIL_TRUSTED_KEYS", raising=False)
    bundle = tmp_path / "trt"
    shutil.copytree(FIXTURE, bundle)
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["artifacts"]["tensorrt"] = {"file": "model.onnx", "format": "onnx",
                                         "build": {"precision": "fp32", "max_batch": 8, "workspace_mb": 256}}
    path.write_text(json.dumps(manifest))
    assert open_bundle(bundle).manifest["artifacts"]["tensorrt"]
    (bundle / "engines").mkdir()
    return bundle


def sign(bundle: Path, tmp_path: Path) -> Path:
    from sensorveil.export.signing import generate_key_pair, load_private_key, sign_bundle
    private, public = generate_key_pair(tmp_path / "keys")
    sign_bundle(bundle, load_private_key(private))
    return public


def test_an_engine_the_runtime_built_and_recorded_loads_and_reads_back(trt_bundle, tmp_path):
    public = sign(trt_bundle, tmp_path)
    engine = trt_bundle / "engines" / "gpu-trt10-fp32-b8-w256-abc.engine"
    engine_cache.write_recorded(engine, b"serialized engine bytes", onnx_sha256="0" * 64)
    assert open_bundle(trt_bundle, trusted_keys=[public]).signature["status"] == "trusted"
    assert engine_cache.read_recorded(engine) == b"serialized engine bytes"


@pytest.mark.parametrize("plant", ["unrecorded engine", "unknown file", "link", "folder", "fifo", "orphan record",
                                   "resized engine"])
def test_anything_else_in_engines_is_refused_before_tensorrt(trt_bundle, tmp_path, plant):
    public = sign(trt_bundle, tmp_path)
    engines = trt_bundle / "engines"
    if plant == "unrecorded engine":       # an engine copied in from elsewhere: nobody vouches for its bytes
        (engines / "gpu-trt10-fp32-b8-w256-abc.engine").write_bytes(b"someone else's engine")
        fragment = "has no record"
    elif plant == "unknown file":
        (engines / "notes.txt").write_text("x")
        fragment = "is not an engine this runtime built"
    elif plant == "link":
        outside = tmp_path / "elsewhere.engine"
        outside.write_bytes(b"engine")
        os.symlink(outside, engines / "gpu.engine")
        fragment = "is a symbolic link"
    elif plant == "folder":
        (engines / "more").mkdir()
        fragment = "is a folder"
    elif plant == "fifo":
        os.mkfifo(engines / "gpu.engine")
        fragment = "is a FIFO"
    elif plant == "orphan record":
        engine = engines / "gpu.engine"
        engine_cache.write_recorded(engine, b"engine")
        engine.unlink()
        fragment = "records a file that is not there"
    else:
        engine = engines / "gpu.engine"
        engine_cache.write_recorded(engine, b"engine")
        engine.write_bytes(b"a larger engine swapped in")
        fragment = "bytes, not the 6 its record says"
    for keys in ([public], None):
        with pytest.raises(BundleError, match=fragment):
            open_bundle(trt_bundle, trusted_keys=keys)


def test_an_engine_changed_after_it_was_recorded_is_never_returned(trt_bundle):
    engine = trt_bundle / "engines" / "gpu.engine"
    engine_cache.write_recorded(engine, b"engine A")
    engine.write_bytes(b"engine B")            # same size, other bytes
    open_bundle(trt_bundle)                    # names, types and sizes pass; the hash is checked on the bytes read
    with pytest.raises(BundleError, match="other bytes than its record says"):
        engine_cache.read_recorded(engine)


def test_a_linked_engines_folder_is_refused(trt_bundle, tmp_path):
    shutil.rmtree(trt_bundle / "engines")
    outside = tmp_path / "cache"
    outside.mkdir()
    os.symlink(outside, trt_bundle / "engines")
    with pytest.raises(BundleError, match="engines is a symbolic link"):
        open_bundle(trt_bundle)
