"""TensorRT's engine cache (``BUNDLE/engines/``): only what this runtime built and recorded is ever loaded.

An engine is built on the device, for its GPU, so it cannot be among the bundle's hashed and signed files.
Deserializing an engine runs whatever it holds, so "signed means every byte" needs another voucher: the
runtime that builds an engine (or TensorRT's int8 calibration cache) writes beside it a record,
``<file>.record``, with the file's sha256 and size. At load:

- ``check_cache_dir`` (run by ``open_bundle`` before a backend is chosen) refuses anything in ``engines/``
  that is not a regular file (links, folders, FIFOs), any file whose name is neither ``*.engine`` nor
  ``calibration.cache`` nor the record of one, a file without its record, a record without its file, and a
  file whose size is not the recorded one;
- ``read_recorded`` reads a cached file once, checks its sha256 against the record on the bytes read, and
  returns those bytes: the bytes deserialized are the bytes checked.

A record vouches for what this device's runtime built: keep the cache folder writable by the service alone (or
pass the backend a ``cache_dir=`` that is), since whoever may write there may also write records. Pure Python,
no tensorrt import, so every check runs (and is tested) where TensorRT is not installed.
Runs on the boards' Python (3.6).
"""
import hashlib
import json
import os
import stat

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.regular import OPEN_FLAGS, kind_of

RECORD_SUFFIX = ".record"
RECORD_SCHEME = "sensorveil-engine-record-v1"
ENGINE_SUFFIX = ".engine"
CALIBRATION_CACHE = "calibration.cache"
MAX_CACHED_BYTES = 1 << 32          # 4 GiB: far above any engine of a privatizer or a person detector
MAX_RECORD_BYTES = 4096
MAX_CACHE_ENTRIES = 256
CHUNK = 1 << 20


def cached_kind(name):
    """True for the names a cache may hold files under (an engine or the int8 calibration cache)."""
    return name.endswith(ENGINE_SUFFIX) and len(name) > len(ENGINE_SUFFIX) or name == CALIBRATION_CACHE


def _open_regular(path, what):
    """A file object of the regular file ``path``, never through a link and never waiting on a FIFO."""
    try:
        descriptor = os.open(str(path), OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        reason = "is a symbolic link" if os.path.islink(str(path)) else "cannot be read ({})".format(
            error.strerror or error)
        raise BundleError("{} {}; expected {}".format(path, reason, what))
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise BundleError("{} is {}; expected {}".format(path, kind_of(mode), what))
    return os.fdopen(descriptor, "rb")


def read_record(path):
    """The record of the cached file ``path`` (a dict with sha256 and size), or one BundleError."""
    record_path = str(path) + RECORD_SUFFIX
    with _open_regular(record_path, "the record this runtime wrote when it built {}".format(
            os.path.basename(str(path)))) as handle:
        data = handle.read(MAX_RECORD_BYTES + 1)
    try:
        record = json.loads(data.decode("utf-8")) if len(data) <= MAX_RECORD_BYTES else None
    except (ValueError, UnicodeDecodeError):
        record = None
    valid = (isinstance(record, dict) and record.get("scheme") == RECORD_SCHEME
             and record.get("file") == os.path.basename(str(path))
             and isinstance(record.get("sha256"), str) and len(record["sha256"]) == 64
             and isinstance(record.get("size"), int) and not isinstance(record.get("size"), bool)
             and 0 <= record["size"] <= MAX_CACHED_BYTES)
    if not valid:
        raise BundleError("{} is not a record this runtime writes; expected JSON with \"scheme\": \"{}\", the file's "
                          "name, sha256 and size (remove the engines folder to rebuild)".format(record_path,
                                                                                              RECORD_SCHEME))
    return record


def _mismatch(path, what):
    return BundleError("{}: {} its record says; nobody vouches for these bytes, refusing to load them (remove the "
                       "engines folder, and the runtime builds and records the engine again)".format(path, what))


def check_cache_dir(folder):
    """Refuse a cache folder that holds anything but recorded engines (see the module docstring). Checks
    names, file types and sizes; the hash is checked on the bytes loaded (``read_recorded``)."""
    folder = str(folder)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise BundleError("{} is {}; expected a folder of engines this runtime built (or none)".format(
            folder, kind_of(mode)))
    names = sorted(os.listdir(folder))
    if len(names) > MAX_CACHE_ENTRIES:
        raise BundleError("{} holds {} entries; expected a few engines and their records".format(folder, len(names)))
    present = set(names)
    for name in names:
        path = os.path.join(folder, name)
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError("{} is {}; the engine cache holds only regular files this runtime built and "
                              "recorded".format(path, kind_of(mode)))
        if name.endswith(RECORD_SUFFIX) and cached_kind(name[:-len(RECORD_SUFFIX)]):
            if name[:-len(RECORD_SUFFIX)] not in present:
                raise BundleError("{} records a file that is not there; expected each record beside its engine "
                                  "(remove the engines folder to rebuild)".format(path))
            continue
        if not cached_kind(name):
            raise BundleError("{} is not an engine this runtime built (expected *{} or {} files, each with its "
                              "{} record); refusing to load the bundle".format(path, ENGINE_SUFFIX, CALIBRATION_CACHE,
                                                                               RECORD_SUFFIX))
        if name + RECORD_SUFFIX not in present:
            raise BundleError("{} has no record ({}): no runtime recorded building it, so nobody vouches for its "
                              "bytes; refusing to load the bundle (remove it, and the runtime builds and records "
                              "the engine again)".format(path, name + RECORD_SUFFIX))
        record = read_record(path)
        if os.lstat(path).st_size != record["size"]:
            raise _mismatch(path, "{} bytes, not the {}".format(os.lstat(path).st_size, record["size"]))


def read_recorded(path):
    """The bytes of a cached file, read once (chunked, never past the recorded size) and checked against its
    record; one BundleError when there is no record or the bytes are not the recorded ones."""
    record = read_record(path)
    digest, chunks, size = hashlib.sha256(), [], 0
    with _open_regular(path, "an engine this runtime built") as handle:
        if os.fstat(handle.fileno()).st_size != record["size"]:
            raise _mismatch(path, "{} bytes, not the {}".format(os.fstat(handle.fileno()).st_size, record["size"]))
        while size <= record["size"]:
            chunk = handle.read(min(CHUNK, record["size"] + 1 - size))
            if not chunk:
                break
            digest.update(chunk)
            chunks.append(chunk)
            size += len(chunk)
    if size != record["size"] or digest.hexdigest() != record["sha256"]:
        raise _mismatch(path, "other bytes than")
    return b"".join(chunks)


def write_recorded(path, data, **details):
    """Write a cached file the runtime built, then its record (each through a temporary name and a rename, so a
    reader never sees half of either). ``details`` (ONNX sha256, TensorRT version) go into the record."""
    path = str(path)
    data = bytes(data)
    record = dict(details, scheme=RECORD_SCHEME, file=os.path.basename(path),
                  sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    for target, content in ((path, data), (path + RECORD_SUFFIX, json.dumps(record, indent=2).encode("ascii"))):
        temporary = "{}.{}.tmp".format(target, os.getpid())
        with open(temporary, "wb") as handle:
            handle.write(content)
        os.replace(temporary, target)
