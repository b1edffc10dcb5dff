"""Bundle trust: signed manifests, files read once, nothing unlisted, one spelling per file.

Every test works on a copy of a bundle made by the exporter, as an attacker with write access to
the bundle (or a careless operator) would."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime import BundleError, Privatizer, TrustError, open_bundle
from sensorveil.runtime.bundle import file_record

pytest.importorskip("cryptography", reason="signing needs the 'cryptography' package")
onnx = pytest.importorskip("onnx", reason="the identity model is built with the 'onnx' package")

FRAME = np.linspace(0, 16, 64, dtype=np.float32).reshape(8, 8)


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sensorveil", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two key pairs made by the CLI: the publisher's and someone else's."""
    made = {}
    for who in ("publisher", "stranger"):
        folder = tmp_path_factory.mktemp(who)
        result = cli("keys", "generate", "--out", folder)
        assert result.returncode == 0, result.stderr
        made[who] = (folder / "signer.key", folder / "signer.pub")
    return made


@pytest.fixture(autouse=True)
def no_device_policy(monkeypatch):
    monkeypatch.delenv("SENSORVEIL_TRUSTED_KEYS", raising=False)


def signed_copy(bundle, tmp_path, key_file, name="signed"):
    from sensorveil.export.signing import load_private_key, sign_bundle
    target = tmp_path / name
    shutil.copytree(bundle, target)
    sign_bundle(target, load_private_key(key_file))
    return target


def identity_model_bytes() -> bytes:
    """A model that returns its input unchanged: the attacker's pass-through privatizer."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 8, 8])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "passthrough", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def swap_in_identity_model(bundle):
    """Replace model.onnx and fix its sha256 and size in the manifest, leaving manifest.sig as it was."""
    model = bundle / "model.onnx"
    model.write_bytes(identity_model_bytes())
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["model.onnx"] = file_record(model)
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))


# -- keys and signing -------------------------------------------------------------------------------
@pytest.mark.boots
def test_keys_generate_writes_an_owner_only_private_key_and_never_overwrites(keys):
    private, public = keys["publisher"]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in private.read_bytes() and b"PUBLIC KEY" in public.read_bytes()
    again = cli("keys", "generate", "--out", private.parent)
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_export_sign_writes_a_signature_the_trusted_key_accepts(digits_run, keys, tmp_path):
    private, public = keys["publisher"]
    out = tmp_path / "bundle"
    result = cli("export", digits_run, "--format", "onnx", "--sign", private, "--out", out)
    assert result.returncode == 0, result.stderr
    assert (out / "manifest.sig").is_file() and "manifest.sig" not in json.loads((out / "manifest.json").read_text())[
        "files"
    ]
    p = Privatizer.load(out, trusted_keys=[public])
    assert p.signature["status"] == "trusted" and p.describe()["signature"] == "trusted"
    assert p(FRAME).shape == (8, 8)


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_signed_bundle_loads_without_keys_and_says_it_was_not_checked(digits_bundle, keys, tmp_path):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    p = Privatizer.load(bundle)
    assert p.signature["status"] == "signed" and "not checked" in p.signature["detail"]
    assert Privatizer.load(digits_bundle).signature["status"] == "unsigned"


# -- the tampered-model case ------------------------------------------------------------------
@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_identity_model_with_fixed_sha256_is_refused_with_signing_on(digits_bundle, keys, tmp_path):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    swap_in_identity_model(bundle)
    with pytest.raises(TrustError, match="signature does not match the manifest"):
        Privatizer.load(bundle, trusted_keys=[keys["publisher"][1]])


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_identity_model_with_fixed_sha256_is_reported_unsigned_with_signing_off(digits_bundle, keys, tmp_path):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    swap_in_identity_model(bundle)
    p = Privatizer.load(bundle)
    np.testing.assert_array_equal(p(FRAME), FRAME)  # it is the pass-through: the load must not hide that
    assert p.signature["status"] == "unsigned" and "does not match" in p.signature["detail"]


# -- which bundles a device with keys refuses ---------------------------------------------------------
@pytest.mark.parametrize("configured_by", ["argument", "environment", "environment folder"])
@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_unsigned_bundle_is_refused_when_keys_are_configured(digits_bundle, keys, configured_by, monkeypatch):
    public = keys["publisher"][1]
    if configured_by == "argument":
        trusted = [public]
    else:
        monkeypatch.setenv("SENSORVEIL_TRUSTED_KEYS", str(public if configured_by == "environment" else public.parent))
        trusted = None
    with pytest.raises(TrustError, match="not signed"):
        Privatizer.load(digits_bundle, trusted_keys=trusted)


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_bundle_signed_by_another_key_is_refused(digits_bundle, keys, tmp_path):
    bundle = signed_copy(digits_bundle, tmp_path, keys["stranger"][0])
    with pytest.raises(TrustError, match="not among the trusted keys"):
        Privatizer.load(bundle, trusted_keys=[keys["publisher"][1]])


@pytest.mark.parametrize("edit", ["manifest value", "signature bytes", "signature garbage"])
@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_any_change_after_signing_is_refused(digits_bundle, keys, tmp_path, edit):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    if edit == "manifest value":
        manifest = json.loads((bundle / "manifest.json").read_text())
        manifest["input"]["normalization"]["scale"] = 32.0  # still a valid manifest
        (bundle / "manifest.json").write_text(json.dumps(manifest))
    elif edit == "signature bytes":
        record = json.loads((bundle / "manifest.sig").read_text())
        record["signature"] = (
            record["signature"][:10] + ("A" if record["signature"][10] != "A" else "B") + record["signature"][11:]
        )
        (bundle / "manifest.sig").write_text(json.dumps(record))
    else:
        (bundle / "manifest.sig").write_bytes(b"\x00" * 300)
    with pytest.raises(TrustError):
        Privatizer.load(bundle, trusted_keys=[keys["publisher"][1]])


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_private_key_given_as_trusted_key_is_a_clear_error(digits_bundle, keys, tmp_path):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    with pytest.raises(TrustError, match="not a PEM public key"):
        Privatizer.load(bundle, trusted_keys=[keys["publisher"][0]])


# -- files: read once, all listed, one spelling each -----------------------------------------------------
def copy_of(bundle, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(bundle, target)
    return target


@pytest.mark.exports
@pytest.mark.trains
def test_file_swapped_after_the_check_is_never_run(digits_bundle, tmp_path):
    bundle = copy_of(digits_bundle, tmp_path)
    verified = open_bundle(bundle)  # hashes checked here ...
    (bundle / "model.onnx").write_bytes(identity_model_bytes())  # ... the file swapped before the backend loads
    y = Privatizer(verified)(FRAME)
    assert not np.array_equal(y, FRAME)  # the verified bytes ran, not the swapped file


@pytest.mark.parametrize("stray", ["model.onnx.data", "sub/extra.bin", ".hidden"])
@pytest.mark.exports
@pytest.mark.trains
def test_unlisted_file_in_the_bundle_is_refused(digits_bundle, tmp_path, stray):
    bundle = copy_of(digits_bundle, tmp_path)
    (bundle / stray).parent.mkdir(parents=True, exist_ok=True)
    (bundle / stray).write_bytes(b"weights an ONNX model could load as external data")
    with pytest.raises(BundleError, match="not listed in the manifest's files"):
        Privatizer.load(bundle)


@pytest.mark.exports
@pytest.mark.trains
def test_symbolic_link_in_place_of_a_listed_file_is_refused(digits_bundle, tmp_path):
    bundle = copy_of(digits_bundle, tmp_path)
    real = tmp_path / "elsewhere.onnx"
    shutil.move(str(bundle / "model.onnx"), real)
    (bundle / "model.onnx").symlink_to(real)
    with pytest.raises(BundleError, match="symbolic link|outside the bundle"):
        Privatizer.load(bundle)


@pytest.mark.parametrize(
    "alias, fragment",
    [
        ("./model.onnx", "not a plain relative path"),
        ("./././model.onnx", "not a plain relative path"),
        ("sub//model.onnx", "not a plain relative path"),
        ("../model.onnx", "outside the bundle"),
        ("/etc/passwd", "outside the bundle"),
        ("manifest.sig", "cannot be hashed inside itself"),
    ],
)
@pytest.mark.exports
@pytest.mark.trains
def test_aliases_and_outside_paths_are_refused(digits_bundle, tmp_path, alias, fragment):
    bundle = copy_of(digits_bundle, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][alias] = dict(manifest["files"]["model.onnx"])
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=fragment):
        Privatizer.load(bundle)


@pytest.mark.exports
@pytest.mark.trains
def test_twenty_thousand_aliases_are_refused_without_hashing_them(digits_bundle, tmp_path, monkeypatch):
    bundle = copy_of(digits_bundle, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for i in range(20000):  # 20,000 spellings of model.onnx
        manifest["files"][f"./d{i}/../model.onnx"] = dict(manifest["files"]["model.onnx"])
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    import hashlib

    calls = []
    real_sha256 = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: calls.append(1) or real_sha256(*a))
    with pytest.raises(BundleError, match="1024 listed files|not a plain relative path|outside the bundle"):
        open_bundle(bundle)
    assert len(calls) <= 1


# -- rollback: a pinned minimum serial ------------------------------------------------------------------
@pytest.fixture
def no_serial_policy(monkeypatch):
    monkeypatch.delenv("SENSORVEIL_MIN_SERIAL", raising=False)


def signed_with_serial(bundle, tmp_path, key_file, serial, name):
    from sensorveil.export.signing import load_private_key, sign_bundle

    target = tmp_path / name
    shutil.copytree(bundle, target)
    sign_bundle(target, load_private_key(key_file), serial=serial)
    return target


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_signing_writes_a_serial_that_grows(digits_bundle, keys, tmp_path, no_serial_policy):
    bundle = signed_copy(digits_bundle, tmp_path, keys["publisher"][0])
    serial = json.loads((bundle / "manifest.json").read_text())["serial"]
    assert isinstance(serial, int) and serial > 1_700_000_000  # the Unix time of signing


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_an_older_signed_bundle_is_refused_once_a_serial_is_pinned(
    digits_bundle, keys, tmp_path, no_serial_policy, monkeypatch
):
    old = signed_with_serial(digits_bundle, tmp_path, keys["publisher"][0], 5, "old")
    new = signed_with_serial(digits_bundle, tmp_path, keys["publisher"][0], 6, "new")
    trusted = [keys["publisher"][1]]
    assert Privatizer.load(old, trusted_keys=trusted, min_serial=5).signature["status"] == "trusted"
    assert Privatizer.load(new, trusted_keys=trusted, min_serial=6).signature["status"] == "trusted"
    with pytest.raises(TrustError, match="bundle serial 5 is below 6"):
        Privatizer.load(old, trusted_keys=trusted, min_serial=6)
    monkeypatch.setenv("SENSORVEIL_MIN_SERIAL", "6")  # the device's policy: code cannot lower it
    with pytest.raises(TrustError, match="bundle serial 5 is below 6"):
        Privatizer.load(old, trusted_keys=trusted, min_serial=1)


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_a_pinned_serial_needs_a_trusted_signature(digits_bundle, keys, tmp_path, no_serial_policy):
    bundle = signed_with_serial(digits_bundle, tmp_path, keys["publisher"][0], 9, "signed")
    with pytest.raises(TrustError, match="only a trusted signature can vouch for"):
        Privatizer.load(bundle, min_serial=1)  # no trusted key: anyone could have written the serial
    with pytest.raises(TrustError, match="only a trusted signature"):
        Privatizer.load(digits_bundle, min_serial=1)


@pytest.mark.parametrize("value", ["ten", "-1", "0"])
@pytest.mark.exports
@pytest.mark.trains
def test_a_bad_serial_setting_is_an_error_not_ignored(digits_bundle, monkeypatch, value):
    monkeypatch.setenv("SENSORVEIL_MIN_SERIAL", value)
    with pytest.raises(TrustError, match="SENSORVEIL_MIN_SERIAL|min_serial"):
        Privatizer.load(digits_bundle)
