"""Bundle reading: the manifest, its signature and every file it lists, each read once.

No pickle anywhere: a manifest is JSON, models are bytes the backend libraries parse, arrays travel as
.npy loaded with allow_pickle=False. What a valid manifest is lives in ``sensorveil.runtime.schema``;
signatures in ``sensorveil.runtime.trust``.

Every listed file is opened once: its bytes are hashed and those same bytes are what the backends and
stages load (``Bundle.read``), so a file swapped between the check and the load is never run. Files
in the bundle directory that the manifest does not list are refused: a backend could pick them up on
its own (ONNX external data, an IR's weights) without anyone having hashed them.

The writer lives in ``sensorveil.export``; it uses ``sha256_of`` and ``SCHEMA_VERSION`` from here.
"""
import errno
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sensorveil.runtime import engine_cache, trust
from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.schema import (  # noqa: F401
    MANIFEST_NAME,
    MAX_FILES,
    READABLE_SCHEMAS,
    REQUIRED_KEYS,
    REQUIRED_SPEC_KEYS,
    SCHEMA_VERSION,
    SIGNATURE_NAME,
    SINGLE_GRAPH,
    graphs_of,
    pipeline_of,
    validate_manifest,
)

MAX_MANIFEST_BYTES = 16 << 20      # a real manifest is a few KB; this keeps a hostile one from filling memory
# every listed file is held in memory (the backends load the very bytes that were hashed): the sum of the sizes
# the manifest declares is checked against this before a byte is read. ONNX's own protobuf limit is 2 GiB, and
# a privatizer with its person detector and bank is tens of MB.
MAX_BUNDLE_BYTES = 2 << 30
# TensorRT builds its engine on the device and caches it here, inside the bundle (tensorrt_backend.py);
# the only unlisted folder a bundle may hold, and only when it carries a tensorrt artifact.
ENGINE_CACHE_DIR = "engines"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_record(path: Path) -> dict:
    return {"sha256": sha256_of(path), "size": path.stat().st_size}


@dataclass(frozen=True)
class Bundle:
    """A verified bundle directory, its parsed manifest, the verified bytes of its files and what is
    known about its signature (``trust.signature_status``)."""

    root: Path
    manifest: dict
    contents: dict = field(default_factory=dict, repr=False, compare=False)
    signature: dict = field(default_factory=lambda: dict(trust.NOT_CHECKED), compare=False)
    # the pre-processor the manifest declares (a camera entry's CameraSettings), parsed and checked at load
    declared: object = field(default=None, compare=False)

    def path(self, name: str) -> Path:
        """Where a file lies; for messages and tools. Loading goes through ``read``."""
        return self.root / name

    def read(self, name: str) -> bytes:
        """The bytes of a listed file, as hashed at load: the only way backends and stages get a file."""
        if name not in self.contents:
            files = self.manifest.get("files", {})
            if name not in files:
                raise BundleError(f"{self.root}: {name} is not listed in the manifest's files (so it is not verified)")
            self.contents[name] = read_verified(self.root, name, files[name])
        return self.contents[name]

    def artifact(self, backend: str) -> dict:
        artifacts = self.manifest["artifacts"]
        if backend not in artifacts:
            raise BundleError(
                f"bundle {self.root} has no artifact for backend {backend!r}; "
                f"it has: {', '.join(sorted(artifacts)) or 'none'}")
        return artifacts[backend]

    @property
    def pipeline(self) -> list:
        """The mechanism's stages, each a dict with a 'kind' (see sensorveil.runtime.stages)."""
        return pipeline_of(self.manifest)

    def graph_names(self, backend: str) -> list:
        return list(graphs_of(self.artifact(backend)))

    def graph_artifact(self, backend: str, graph: str = SINGLE_GRAPH) -> dict:
        """The backend's artifact entry for one graph: its own keys ('file', ...) over the shared ones."""
        artifact = self.artifact(backend)
        graphs = graphs_of(artifact)
        if graph not in graphs:
            raise BundleError(f"bundle {self.root}: the {backend} artifact has no graph {graph!r}; "
                              f"it has {sorted(graphs)}")
        shared = {key: value for key, value in artifact.items() if key not in ("graphs", "file")}
        return {**shared, **graphs[graph]}



# -- reading --------------------------------------------------------------------------------------
# O_NONBLOCK: opening a FIFO for reading would otherwise wait forever for a writer; a regular file
# ignores it. What was opened is then checked to be a regular file before a byte is read.
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def open_regular(path: str, what: str, follow_links: bool = True):
    """A binary file object for ``path``, or one BundleError when it is not a regular file (a FIFO, a
    device, a socket or a folder cannot block or feed a load)."""
    flags = OPEN_FLAGS | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    descriptor = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise BundleError(f"{path} is not a regular file; expected {what}")
    return os.fdopen(descriptor, "rb")


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """A small file of the bundle read whole, refusing one larger than ``limit`` instead of filling memory,
    and one reached through a symbolic link (manifest.json and manifest.sig are the bundle's own regular
    files: a link could make a manifest from elsewhere, or a signature from another bundle, speak for it)."""
    try:
        handle = open_regular(str(path), what, follow_links=False)
    except OSError as error:
        if error.errno == errno.ELOOP or os.path.islink(str(path)):
            raise BundleError("{} is a symbolic link; expected {}, a regular file inside the bundle".format(
                path, what)) from None
        raise
    with handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise BundleError(f"{path} is larger than {limit} bytes; expected {what}")
    return data


def read_manifest(root: Path) -> dict:
    manifest_path = root / MANIFEST_NAME
    if not root.is_dir():
        raise BundleError(f"expected a bundle directory, got {root} (not a directory)")
    if not os.path.lexists(str(manifest_path)):
        raise BundleError(f"expected {manifest_path} (a bundle directory holds manifest.json)")
    try:
        data = read_capped(manifest_path, MAX_MANIFEST_BYTES, "a manifest of a few KB")
    except OSError as error:
        raise BundleError(f"{manifest_path} cannot be read ({error.strerror or error})") from None
    return parse_manifest(data, manifest_path)


def parse_manifest(data: bytes, where) -> dict:
    """JSON object from bytes; every way JSON can fail (nesting too deep for the parser, a number with
    too many digits) is one BundleError."""
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BundleError(f"{where} is not valid JSON: {str(error)[:200]}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{where} must hold a JSON object, got {type(manifest).__name__}")
    return manifest


def read_signature(root: Path) -> "bytes | None":
    """manifest.sig's bytes, or None when the bundle is unsigned."""
    path = root / SIGNATURE_NAME
    if not os.path.lexists(str(path)):
        return None
    try:
        return read_capped(path, trust.MAX_SIGNATURE_BYTES, "a signature of about 250 bytes")
    except OSError as error:
        raise BundleError(f"{path} cannot be read ({error.strerror or error})") from None


def read_verified(root: Path, name: str, record: dict) -> bytes:
    """Open a listed file once (never through a symbolic link), check its size and sha256 on the bytes
    read, and return those bytes."""
    path = os.path.join(str(root), *name.split("/"))
    real_root = os.path.realpath(str(root))
    if os.path.commonpath([os.path.realpath(path), real_root]) != real_root:
        raise BundleError(f"{root}: file entry {name!r} points outside the bundle directory")
    try:
        handle = open_regular(path, "a regular file in the bundle", follow_links=False)
    except FileNotFoundError:
        raise BundleError(f"{root}: listed file {name!r} is missing") from None
    except BundleError:
        raise BundleError(f"{root}: listed file {name!r} is not a regular file") from None
    except OSError as error:
        reason = "is a symbolic link" if error.errno == errno.ELOOP else f"cannot be read ({error.strerror})"
        raise BundleError(f"{root}: listed file {name!r} {reason}; expected a regular file in the bundle") from None
    with handle:
        # the size first, from the file system: a file of another size is refused before a byte is read
        found = os.fstat(handle.fileno()).st_size
        if found != record["size"]:
            raise BundleError(f"{root}: {name} has {found} bytes, the manifest says {record['size']}; the bundle was "
                              "modified or truncated, refusing to load it")
        # one read of at most the declared size (+1 to see a file that grew since): its bytes are kept for the
        # backends anyway, so reading in pieces would only add a copy; what bounds the read is the size, checked
        # against the file system here and, with every other listed size, against MAX_BUNDLE_BYTES before any read
        data = handle.read(record["size"] + 1)
    size = len(data)
    if size != record["size"]:
        raise BundleError(
            f"{root}: {name} has {'more than ' if size > record['size'] else ''}{size} bytes, the manifest "
            f"says {record['size']}; the bundle was modified or truncated, refusing to load it")
    actual = hashlib.sha256(data).hexdigest()
    if actual != record["sha256"]:
        raise BundleError(
            f"{root}: {name} sha256 {actual[:12]}... does not match the manifest's "
            f"{str(record['sha256'])[:12]}...; the bundle was modified, refusing to load it")
    return data


def refuse_unlisted(root: Path, manifest: dict) -> None:
    """Every file under the bundle directory is listed (or is the manifest or its signature)."""
    allowed = set(manifest["files"]) | {MANIFEST_NAME, SIGNATURE_NAME}
    entries = 0
    for folder, subfolders, names in os.walk(str(root)):
        relative = os.path.relpath(folder, str(root)).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        if not prefix and ENGINE_CACHE_DIR in subfolders and "tensorrt" in manifest["artifacts"]:
            # not hashed by the manifest: only engines this runtime built and recorded (engine_cache.py)
            engine_cache.check_cache_dir(os.path.join(str(root), ENGINE_CACHE_DIR))
            subfolders.remove(ENGINE_CACHE_DIR)
        # os.walk does not descend into linked folders; a link is an entry like a file
        links = [name for name in subfolders if os.path.islink(os.path.join(folder, name))]
        for name in names + links:
            entries += 1
            if prefix + name not in allowed:
                raise BundleError(f"{root}: {prefix + name} is in the bundle directory but not listed in the "
                                  "manifest's files, so nothing verified it; refusing to load the bundle (remove "
                                  "the file, or re-export the bundle)")
        if entries > MAX_FILES + 2:
            raise BundleError(f"{root} holds more than {MAX_FILES} files; expected a bundle")


def check_declared_sizes(root: Path, manifest: dict) -> None:
    """Before any file is read: the listed files together fit in what the runtime holds in memory."""
    sizes = {name: record["size"] for name, record in manifest["files"].items()}
    total = sum(sizes.values())
    if total > MAX_BUNDLE_BYTES:
        largest = max(sizes, key=sizes.get)
        raise BundleError(f"{root}: the manifest lists {total} bytes of files ({largest} alone {sizes[largest]}), more "
                          f"than the {MAX_BUNDLE_BYTES} bytes this runtime reads into memory; expected a bundle of at "
                          "most 2 GiB, refusing to read it")


def open_bundle(path: "str | Path", trusted_keys=None, min_serial: "int | None" = None) -> Bundle:
    """Read, check the signature of, validate and verify a bundle; one BundleError (or subclass) says why
    it is refused. ``trusted_keys``: public key files; SENSORVEIL_TRUSTED_KEYS adds to them.
    ``min_serial``: the lowest signed serial accepted; SENSORVEIL_MIN_SERIAL may raise it (rollback)."""
    min_serial = trust.configured_min_serial(min_serial)
    root = Path(path)
    if root.is_file() and root.name == MANIFEST_NAME:
        root = root.parent
    manifest = read_manifest(root)
    # the signature is checked before anything else is read: with keys configured, nothing an
    # unsigned manifest says is acted on
    signature = trust.signature_status(manifest, read_signature(root), trust.configured_key_paths(trusted_keys), root)
    trust.check_serial(manifest, signature, min_serial, root)
    declared = validate_manifest(manifest, root)
    refuse_unlisted(root, manifest)
    check_declared_sizes(root, manifest)
    contents = {name: read_verified(root, name, record) for name, record in manifest["files"].items()}
    return Bundle(root=root, manifest=manifest, contents=contents, signature=signature, declared=declared)
