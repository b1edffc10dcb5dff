"""Writes bundles: the model files first, then manifest.json with the sha256 and size of each.

The schema (what keys, which version) is defined once, in ``sensorveil.runtime.bundle``; the
runtime verifies every hash on load, so a bundle edited after export is refused on the device.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from sensorveil import __version__
from sensorveil.runtime.bundle import MANIFEST_NAME, SCHEMA_VERSION, SIGNATURE_NAME, file_record, open_bundle


def write_manifest(out_dir: Path, mechanism: dict, input_spec: dict, output_spec: dict, artifacts: dict,
                   extra: dict | None = None) -> Path:
    """List every file in ``out_dir`` (except the manifest) with its hash, write the manifest,
    then read the bundle back through the runtime's verifier so a bad bundle never leaves here."""
    out_dir = Path(out_dir)
    files = {path.relative_to(out_dir).as_posix(): file_record(path)
             for path in sorted(out_dir.rglob("*"))
             if path.is_file() and path.relative_to(out_dir).as_posix() not in (MANIFEST_NAME, SIGNATURE_NAME)}
    manifest = {"schema_version": SCHEMA_VERSION, "sensorveil_version": __version__,
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "mechanism": mechanism, "input": input_spec, "output": output_spec,
                "artifacts": artifacts, "files": files, **(extra or {})}
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, default=_plain))
    open_bundle(out_dir)
    return out_dir


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
