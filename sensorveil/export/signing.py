"""Signing bundles on the workstation: an Ed25519 key pair, and manifest.sig beside manifest.json.

The signature format, and the check the device runs, live in ``sensorveil.runtime.trust``; this
module only makes keys and signatures. ``cryptography`` is imported here, when a key is made or used.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sensorveil.runtime import trust
from sensorveil.runtime.bundle import MANIFEST_NAME, read_manifest
from sensorveil.runtime.manifest_fields import is_integer

PRIVATE_KEY_NAME, PUBLIC_KEY_NAME = "signer.key", "signer.pub"


def _serialization():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise trust.TrustError("signing needs the 'cryptography' package: pip install cryptography "
                               "(or pip install 'sensorveil[sign]')") from None
    return serialization, ed25519


def generate_key_pair(out_dir) -> tuple[Path, Path]:
    """signer.key (PEM, PKCS#8, readable by its owner only) and signer.pub (PEM) in ``out_dir``; an
    existing key is never overwritten (bundles signed with it would no longer match a new one)."""
    serialization, ed25519 = _serialization()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    private_path, public_path = out_dir / PRIVATE_KEY_NAME, out_dir / PUBLIC_KEY_NAME
    existing = [str(path) for path in (private_path, public_path) if path.exists()]
    if existing:
        raise FileExistsError(f"{', '.join(existing)} already exist(s); refusing to overwrite a signing key "
                              "(move it away first, or choose another --out)")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    # O_EXCL with mode 0600: the private key is never readable by others, not even for a moment
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private_pem)
    public_path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path


def load_private_key(path):
    """The Ed25519 private key in a PEM file, or one TrustError saying what the file is instead."""
    serialization, ed25519 = _serialization()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except OSError as error:
        raise trust.TrustError(f"signing key {path} cannot be read ({error.strerror or error})") from None
    except (ValueError, TypeError) as error:
        raise trust.TrustError(f"signing key {path} is not an unencrypted PEM private key ({error}); expected the "
                               "signer.key written by `sensorveil keys generate`") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise trust.TrustError(f"signing key {path} is a {type(key).__name__}; expected an Ed25519 key "
                               "(sensorveil keys generate)")
    return key


def sign_bundle(bundle_dir, private_key, serial: "int | None" = None) -> Path:
    """Write manifest.sig for the bundle's manifest as it is now, then check it as a device would.
    The signed manifest carries a ``serial`` (given, or the one it holds, or the current Unix time, so
    later exports sign higher serials): a device that pins ``min_serial`` refuses older signed bundles."""
    bundle_dir = Path(bundle_dir)
    manifest = read_manifest(bundle_dir)
    serial = serial if serial is not None else manifest.get("serial") or int(time.time())
    if not is_integer(serial) or not trust.MIN_SERIAL <= serial <= trust.MAX_SERIAL:
        raise trust.TrustError(f"bundle serial {serial!r}; expected an integer from {trust.MIN_SERIAL} to "
                               f"{trust.MAX_SERIAL}")
    if manifest.get("serial") != serial:
        manifest["serial"] = serial
        (bundle_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    signature = trust.signature_file_bytes(manifest, private_key)
    path = bundle_dir / trust.SIGNATURE_NAME
    path.write_bytes(signature)
    key_id = trust.key_id_of(trust.raw_public_bytes(private_key.public_key()))
    trust.check_signature(read_manifest(bundle_dir), signature, {key_id: private_key.public_key()}, bundle_dir)
    return path
