"""Bundle schema: reading, validating and hashing. No pickle anywhere: a manifest is JSON,
models are files the backend libraries parse, arrays travel as .npy loaded with allow_pickle=False.

The writer lives in ``sensorveil.export``; it uses ``sha256_of`` and ``SCHEMA_VERSION`` from
here so that one module defines what a valid bundle is.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensorveil.runtime.errors import BundleError

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"
REQUIRED_KEYS = ("schema_version", "mechanism", "input", "output", "artifacts", "files")
REQUIRED_SPEC_KEYS = ("name", "sample_shape", "model_shape", "dtype", "sensor_range", "normalization")


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
    """A verified bundle directory and its parsed manifest."""

    root: Path
    manifest: dict

    def path(self, name: str) -> Path:
        return self.root / name

    def artifact(self, backend: str) -> dict:
        artifacts = self.manifest["artifacts"]
        if backend not in artifacts:
            raise BundleError(
                f"bundle {self.root} has no artifact for backend {backend!r}; "
                f"it has: {', '.join(sorted(artifacts)) or 'none'}")
        return artifacts[backend]


def read_manifest(root: Path) -> dict:
    manifest_path = root / MANIFEST_NAME
    if not root.is_dir():
        raise BundleError(f"expected a bundle directory, got {root} (not a directory)")
    if not manifest_path.is_file():
        raise BundleError(f"expected {manifest_path} (a bundle directory holds manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"{manifest_path} is not valid JSON: {error}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{manifest_path} must hold a JSON object, got {type(manifest).__name__}")
    return manifest


def validate_manifest(manifest: dict, where: Path) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise BundleError(f"{where}: manifest lacks required keys {missing}; expected {list(REQUIRED_KEYS)}")
    version = manifest["schema_version"]
    if version != SCHEMA_VERSION:
        raise BundleError(
            f"{where}: manifest schema_version {version!r} is not supported; this runtime reads "
            f"schema_version {SCHEMA_VERSION} (upgrade sensorveil or re-export the bundle)")
    for side in ("input", "output"):
        spec = manifest[side]
        if not isinstance(spec, dict):
            raise BundleError(f"{where}: manifest '{side}' must be an object with keys {list(REQUIRED_SPEC_KEYS)}")
        absent = [key for key in REQUIRED_SPEC_KEYS if key not in spec]
        if absent:
            raise BundleError(f"{where}: manifest '{side}' lacks {absent}; expected {list(REQUIRED_SPEC_KEYS)}")
    if not isinstance(manifest["artifacts"], dict) or not manifest["artifacts"]:
        raise BundleError(f"{where}: manifest 'artifacts' must name at least one backend's model file")
    for backend, artifact in manifest["artifacts"].items():
        if not isinstance(artifact, dict) or "file" not in artifact:
            raise BundleError(f"{where}: artifact {backend!r} must be an object with a 'file' key")
        if artifact["file"] not in manifest["files"]:
            raise BundleError(f"{where}: artifact {backend!r} file {artifact['file']!r} is not listed in 'files'")


def verify_files(root: Path, files: dict[str, Any]) -> None:
    """Every listed file exists, stays inside the bundle and matches its size and sha256."""
    resolved_root = root.resolve()
    for name, record in files.items():
        path = (root / name).resolve()
        if resolved_root not in path.parents:
            raise BundleError(f"{root}: file entry {name!r} points outside the bundle directory")
        if not path.is_file():
            raise BundleError(f"{root}: listed file {name!r} is missing")
        if not isinstance(record, dict) or "sha256" not in record:
            raise BundleError(f"{root}: file entry {name!r} needs a 'sha256' (and 'size')")
        if "size" in record and path.stat().st_size != record["size"]:
            raise BundleError(
                f"{root}: {name} has {path.stat().st_size} bytes, the manifest says {record['size']}; "
                "the bundle was modified or truncated, refusing to load it")
        actual = sha256_of(path)
        if actual != record["sha256"]:
            raise BundleError(
                f"{root}: {name} sha256 {actual[:12]}... does not match the manifest's "
                f"{str(record['sha256'])[:12]}...; the bundle was modified, refusing to load it")


def open_bundle(path: str | Path) -> Bundle:
    """Read, validate and verify a bundle. Raises BundleError with the reason otherwise."""
    root = Path(path)
    if root.is_file() and root.name == MANIFEST_NAME:
        root = root.parent
    manifest = read_manifest(root)
    validate_manifest(manifest, root)
    verify_files(root, manifest["files"])
    return Bundle(root=root, manifest=manifest)
