"""Audit attackers trained once: each attacker's guesses kept on disk, so an audit that is stopped part-way
resumes where it stopped (``AttackerCache``), and the raw rows' attackers kept in memory across the audits of one
dataset's releases (``RawAttackersOnce``), whose power rows are the same every time.

An audit of depth frames trains 22 attackers, seven of them networks, each of which takes minutes on a 2-core
machine (the audit's progress lines in `python scripts/pass_results.py --datasets synthetic-depth` time each one):
together longer than a working session leaves beside the training. With a cache, an audit run again on the same
release with the same code reads the attackers it already trained instead of training them again. An entry is
found only under the same identity: the bundle's manifest and its run (weights are in the manifest by hash, the
split in the run), the backend, the attacker epochs and the source of the code that trains and scores the
attackers and runs the bundle; any change to them is another folder, never a stale answer.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from sensorveil.sdk.audit import AND_REID, RAW_DATA

CODE_PACKAGES = ("sdk", "runtime")   # the attackers' code and the bundle's: their source keys every entry


def code_digest() -> str:
    """sha256 of the source of sensorveil/sdk and sensorveil/runtime (every .py, in path order)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for name in CODE_PACKAGES:
        for path in sorted((package / name).rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


class AttackerCache:
    """``get(name, seed)`` -> the attacker's guesses (an array, or a tuple of arrays) or None; ``put`` keeps them.
    ``identity``: what the guesses depend on besides the code (JSON-able)."""

    def __init__(self, directory, identity: dict):
        key = json.dumps({**identity, "code": code_digest()}, sort_keys=True, default=str)
        self.directory = Path(directory) / hashlib.sha256(key.encode()).hexdigest()[:16]
        self.hits = 0

    def path(self, name: str, seed: int) -> Path:
        return self.directory / "{}-seed{}.npz".format(re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"), seed)

    def get(self, name: str, seed: int):
        path = self.path(name, seed)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as stored:
            parts = [stored[f"part{k}"] for k in range(int(stored["parts"]))]
            result = tuple(parts) if bool(stored["is_tuple"]) else parts[0]
        self.hits += 1
        return result

    def put(self, name: str, seed: int, result) -> None:
        parts = list(result) if isinstance(result, tuple) else [result]
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(name, seed)
        partial = path.with_name(path.stem + ".partial.npz")
        np.savez(partial, parts=len(parts), is_tuple=isinstance(result, tuple),
                 **{f"part{k}": np.asarray(part) for k, part in enumerate(parts)})
        os.replace(partial, path)   # a run killed while writing leaves no entry, not half of one


class RawAttackersOnce:
    """An audit cache (audit(..., cache=)) shared by one dataset's audits, so the raw rows' attackers train once.

    Every audit trains its power attackers ("raw-data X") on the raw rows, and those rows and splits are the same
    for every release of the dataset. In the raw audit (``start(auditing_raw=True)``: its release is the raw rows)
    family X's own seed-0 attacker is "raw-data X" too. Later audits read them back. A "(and re-id)" attacker
    also meets the audit's own release, so it is read back only in the raw audit; and a release's own attackers
    ("X", not "raw-data X") are never read back: they never stand in for the raw rows'."""

    def __init__(self):
        self.raw, self.auditing_raw = {}, False

    def start(self, auditing_raw: bool) -> "RawAttackersOnce":
        """Begin an audit: of the raw rows themselves (``auditing_raw``) or of a release of them."""
        self.auditing_raw = bool(auditing_raw)
        return self

    def get(self, name: str, seed: int):
        family = name.removeprefix(RAW_DATA).removesuffix(AND_REID)
        if not name.startswith(RAW_DATA) or family not in self.raw:
            return None
        if name.endswith(AND_REID):
            return (self.raw[family],) * 2 if self.auditing_raw else None
        return self.raw[family]

    def put(self, name: str, seed: int, result) -> None:
        if name.startswith(RAW_DATA):
            # a re-id attacker's first guesses are the raw rows': the same as the plain raw-data attacker's
            family = name.removeprefix(RAW_DATA).removesuffix(AND_REID)
            self.raw[family] = result[0] if name.endswith(AND_REID) else result
        elif self.auditing_raw and seed == 0:
            self.raw[name] = result
