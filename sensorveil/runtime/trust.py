"""Signed bundles: which keys a device trusts, and the check of a bundle's signature against them.

A signed bundle carries ``manifest.sig`` beside ``manifest.json``: the one file the manifest does not
list, because it signs the manifest. The manifest lists every other file with its sha256, so one
Ed25519 signature over the manifest covers every byte of the bundle.

What is signed is not the manifest file's bytes but its *canonical* form: the parsed JSON written
again with sorted keys, no whitespace and ASCII only, behind a domain tag (``SIGNED_PREFIX``). The
runtime checks the signature against exactly the object it goes on to use, so two JSON texts that
parse alike (whitespace, key order, duplicate keys) cannot mean different things to the signer and
to the device. NaN and infinity have no canonical form: a manifest holding them cannot be signed.

``manifest.sig`` is a small JSON object::

    {"scheme": "sensorveil-ed25519-v1", "key_id": "<16 hex>", "public_key": "<base64 of 32 bytes>",
     "signature": "<base64 of 64 bytes>"}

``key_id`` is the first 16 hex digits of the sha256 of the raw 32-byte public key; it only picks
which trusted key to try (a wrong id cannot make a bad signature pass). ``public_key`` is the
signer's key, so a device without trusted keys can still tell a bundle whose manifest was changed
after signing ("unsigned": its signature no longer matches) from one that is intact but signed by a
key nobody vouched for ("signed", not "trusted"). Only a configured key makes a bundle "trusted".

The keys a device trusts are PEM public keys (``sensorveil keys generate`` writes ``signer.pub``),
passed as ``Privatizer.load(..., trusted_keys=[...])`` and/or named in the environment setting
``SENSORVEIL_TRUSTED_KEYS`` (paths separated by ``os.pathsep``; a directory stands for the ``*.pub``
files in it). Both add up: the setting is the device's policy, which code cannot switch off. When
any key is configured, an unsigned bundle or one signed by another key is refused.

Rollback: a signed manifest carries ``serial``, an integer the exporter raises with every export (the
Unix time of signing unless given). A device pins the lowest serial it accepts with
``Privatizer.load(..., min_serial=N)`` and/or the environment setting ``SENSORVEIL_MIN_SERIAL`` (the
higher of the two wins); then a bundle below it, or one whose serial no trusted key vouches for (no
key configured, unsigned, no serial), is refused: an older, validly signed bundle cannot be replayed.

``cryptography`` (an audited library; nothing here is hand-rolled) is imported only when a signature
is checked, so a device that does not check signatures does not need it.
Runs on the boards' Python (3.6): no annotations import, no dataclasses here.
"""
import base64
import binascii
import hashlib
import json
import os

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.regular import read_regular

SIGNATURE_NAME = "manifest.sig"
SIGNATURE_SCHEME = "sensorveil-ed25519-v1"
SIGNED_PREFIX = b"sensorveil bundle manifest, signature scheme v1\n"
TRUSTED_KEYS_ENV = "SENSORVEIL_TRUSTED_KEYS"
MIN_SERIAL_ENV = "SENSORVEIL_MIN_SERIAL"
MIN_SERIAL, MAX_SERIAL = 1, (1 << 63) - 1
MAX_SIGNATURE_BYTES = 4096      # the file holds ~150 bytes; anything far larger is not one
MAX_KEY_BYTES = 16384
# what Privatizer.signature reports: "trusted" (checked against a configured key), "signed" (intact,
# signed by the key in manifest.sig, no trusted key configured), "unsigned" (no signature, or one that
# does not match the manifest) and "not checked" (signed, but 'cryptography' is not installed)
TRUSTED, SIGNED, UNSIGNED, UNCHECKED = "trusted", "signed", "unsigned", "not checked"
NOT_CHECKED = {"status": UNCHECKED, "key_id": None, "detail": "the bundle was not opened through open_bundle"}


class TrustError(BundleError):
    """A bundle is unsigned or wrongly signed while keys are trusted, or a trusted key is unusable."""


def canonical_manifest_bytes(manifest):
    """The bytes a signature covers: the manifest object as canonical JSON (see the module docstring)."""
    try:
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise BundleError("the manifest has no canonical form to sign or check ({}); expected plain JSON "
                          "values without NaN or infinity".format(error))
    return SIGNED_PREFIX + text.encode("ascii")


def key_id_of(raw_public_key):
    return hashlib.sha256(raw_public_key).hexdigest()[:16]


def configured_key_paths(trusted_keys=None):
    """The key files a load must check against: the caller's plus those of SENSORVEIL_TRUSTED_KEYS."""
    if isinstance(trusted_keys, (str, bytes, os.PathLike)):
        trusted_keys = [trusted_keys]     # one path, not a sequence of characters
    paths = [str(path) for path in (trusted_keys or [])]
    setting = os.environ.get(TRUSTED_KEYS_ENV)
    entries = [entry.strip() for entry in (setting or "").split(os.pathsep) if entry.strip()]
    if setting is not None and not entries:
        # set but naming nothing (":", "  ", an empty $VARIABLE): the device meant a policy, so it is an error,
        # as an unusable SENSORVEIL_MIN_SERIAL is, never a silent "no keys"
        raise TrustError("{}={!r} names no key; expected key files or folders of *.pub keys separated by {!r} "
                         "(or unset it)".format(TRUSTED_KEYS_ENV, setting[:60], os.pathsep))
    for entry in entries:
        if os.path.isdir(entry):
            found = sorted(os.path.join(entry, name) for name in os.listdir(entry) if name.endswith(".pub"))
            if not found:
                raise TrustError("{} names the folder {}, which holds no *.pub key; expected PEM public keys "
                                 "written by `sensorveil keys generate`".format(TRUSTED_KEYS_ENV, entry))
            paths.extend(found)
        else:
            paths.append(entry)
    return list(dict.fromkeys(paths))


def _ed25519():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise TrustError("trusted keys are configured, and checking a bundle's signature needs the "
                         "'cryptography' package: pip install cryptography (or pip install 'sensorveil[sign]')")
    return ed25519, serialization, InvalidSignature


def raw_public_bytes(public_key):
    _, serialization, _ = _ed25519()
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_trusted_keys(paths):
    """{key id: Ed25519PublicKey} for PEM files; one TrustError naming the file that is unusable."""
    ed25519, serialization, _ = _ed25519()
    keys = {}
    for path in paths:
        # a regular file only: a FIFO named as a key would otherwise hold the load until someone writes to it
        pem = read_regular(path, MAX_KEY_BYTES, "a trusted key: a regular file holding a PEM public key written "
                           "by `sensorveil keys generate`", TrustError)
        try:
            key = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as error:
            raise TrustError("trusted key {} is not a PEM public key ({}); expected the signer.pub written by "
                             "`sensorveil keys generate`, never the private signer.key".format(path, error))
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise TrustError("trusted key {} is a {} key; expected an Ed25519 key (sensorveil keys "
                             "generate)".format(path, type(key).__name__))
        keys[key_id_of(raw_public_bytes(key))] = key
    return keys


def parse_signature(data, where):
    """(key id, 64 signature bytes) from manifest.sig's bytes, or one TrustError saying what is wrong."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        record = None
    if not isinstance(record, dict) or record.get("scheme") != SIGNATURE_SCHEME:
        raise TrustError("{}: {} is not a signature this runtime reads; expected a JSON object with "
                         "\"scheme\": \"{}\", \"key_id\" and \"signature\"".format(where, SIGNATURE_NAME,
                                                                                 SIGNATURE_SCHEME))
    key_id, signature, public_key = (record.get("key_id"), decode_base64(record.get("signature")),
                                     decode_base64(record.get("public_key")))
    if not isinstance(key_id, str) or len(signature) != 64 or len(public_key) != 32:
        raise TrustError("{}: {} holds no usable Ed25519 signature; expected \"key_id\" (16 hex digits), "
                         "\"public_key\" (base64 of 32 bytes) and \"signature\" (base64 of 64 bytes)".format(
                             where, SIGNATURE_NAME))
    return key_id, signature, public_key


def decode_base64(encoded):
    """Bytes of a base64 string; b"" for anything that is not one."""
    try:
        return base64.b64decode(encoded.encode("ascii"), validate=True) if isinstance(encoded, str) else b""
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return b""


def check_signature(manifest, signature_data, keys, where):
    """The id of the trusted key that signed ``manifest``; TrustError if none did."""
    _, _, InvalidSignature = _ed25519()
    if signature_data is None:
        raise TrustError("{}: the bundle is not signed (no {}), and this device trusts only bundles signed by "
                         "key(s) {}; sign it with `sensorveil export ... --sign KEY`".format(
                             where, SIGNATURE_NAME, ", ".join(sorted(keys))))
    key_id, signature, _ = parse_signature(signature_data, where)
    if key_id not in keys:
        raise TrustError("{}: the bundle is signed by key {!r}, which is not among the trusted keys {}; "
                         "refusing to load it".format(where, key_id[:32], ", ".join(sorted(keys))))
    try:
        keys[key_id].verify(signature, canonical_manifest_bytes(manifest))
    except InvalidSignature:
        raise TrustError("{}: the signature does not match the manifest (the manifest or {} was changed "
                         "after signing); refusing to load it".format(where, SIGNATURE_NAME))
    return key_id


def check_own_key(manifest, signature_data, where):
    """With no trusted key: does manifest.sig match this manifest under the key it names? A status dict."""
    if signature_data is None:
        return {"status": UNSIGNED, "key_id": None, "detail": "the bundle has no {}".format(SIGNATURE_NAME)}
    try:
        ed25519, _, InvalidSignature = _ed25519()
    except TrustError as error:
        return {"status": UNCHECKED, "key_id": None, "detail": str(error)}
    try:
        _, signature, public_key = parse_signature(signature_data, where)
        ed25519.Ed25519PublicKey.from_public_bytes(public_key).verify(signature, canonical_manifest_bytes(manifest))
    except (BundleError, InvalidSignature, ValueError) as error:
        return {"status": UNSIGNED, "key_id": None,
                "detail": "{} does not match this manifest (changed after signing?){}".format(
                    SIGNATURE_NAME, ": {}".format(error) if str(error) else "")}
    return {"status": SIGNED, "key_id": key_id_of(public_key),
            "detail": "signed by key {}, which was not checked against any trusted key (none configured: "
                      "trusted_keys=[...] or {})".format(key_id_of(public_key), TRUSTED_KEYS_ENV)}


def signature_status(manifest, signature_data, key_paths, where):
    """The bundle's signature status; with trusted keys configured, a TrustError unless one of them signed
    exactly this manifest."""
    if not key_paths:
        return check_own_key(manifest, signature_data, where)
    key_id = check_signature(manifest, signature_data, load_trusted_keys(key_paths), where)
    return {"status": TRUSTED, "key_id": key_id, "detail": "signed by trusted key {}".format(key_id)}


def signature_file_bytes(manifest, private_key):
    """manifest.sig's content for ``manifest`` signed by an Ed25519PrivateKey (the exporter's side)."""
    public_key = raw_public_bytes(private_key.public_key())
    record = {"scheme": SIGNATURE_SCHEME, "key_id": key_id_of(public_key),
              "public_key": base64.b64encode(public_key).decode("ascii"),
              "signature": base64.b64encode(private_key.sign(canonical_manifest_bytes(manifest))).decode("ascii")}
    return (json.dumps(record, indent=2) + "\n").encode("ascii")


def configured_min_serial(min_serial=None):
    """The lowest serial this device accepts: the higher of ``min_serial`` and SENSORVEIL_MIN_SERIAL, or
    None when neither is set. A setting that is not an integer is an error, never ignored."""
    values = [min_serial] if min_serial is not None else []
    setting = os.environ.get(MIN_SERIAL_ENV, "").strip()
    if setting:
        try:
            values.append(int(setting))
        except ValueError:
            raise TrustError("{}={!r}; expected an integer serial".format(MIN_SERIAL_ENV, setting))
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not MIN_SERIAL <= value <= MAX_SERIAL:
            raise TrustError("min_serial {!r}; expected an integer from {} to {}".format(value, MIN_SERIAL, MAX_SERIAL))
    return max(values) if values else None


def check_serial(manifest, signature, min_serial, where):
    """Refuse a rollback: with a pinned ``min_serial``, the bundle must be trusted and its serial at least it."""
    if min_serial is None:
        return
    if signature["status"] != TRUSTED:
        raise TrustError("{}: this device pins bundle serial >= {}, which only a trusted signature can vouch for; "
                         "the bundle is {} (configure trusted_keys or {})".format(
                             where, min_serial, signature["status"], TRUSTED_KEYS_ENV))
    serial = manifest.get("serial")
    if isinstance(serial, bool) or not isinstance(serial, int) or serial < min_serial:
        raise TrustError("{}: bundle serial {!r} is below {}, the lowest this device accepts (an older bundle "
                         "replayed?); expected a bundle signed with serial >= {}".format(
                             where, serial, min_serial, min_serial))
