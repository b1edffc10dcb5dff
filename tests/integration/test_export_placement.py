"""Nothing lost on export: `sensorveil export RUN --out DIR` writes beside DIR and renames
into place; it refuses an --out that holds anything but an earlier bundle (unless --force), and never the run
folder or a parent of it; two exports into one --out cannot both succeed or remove each other's work."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sensorveil.cli import main
from sensorveil.runtime import Privatizer

ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def export(run, out, *extra) -> int:
    return main(["export", str(run), "--format", "onnx", "--out", str(out), *extra])


@pytest.mark.exports
@pytest.mark.trains
def test_an_out_holding_user_files_is_refused_unless_forced(digits_run, tmp_path, capsys):
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"not a bundle")
    assert export(digits_run, out) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "holiday.jpg" in error[0] and "--force" in error[0]
    assert (out / "holiday.jpg").read_bytes() == b"not a bundle"
    assert export(digits_run, out, "--force") == 0
    assert not (out / "holiday.jpg").exists()
    Privatizer.load(out)
    assert sorted(os.listdir(tmp_path)) == ["photos"]       # no staging folder, no lock left behind


@pytest.mark.exports
@pytest.mark.trains
def test_a_file_at_out_is_refused_unless_forced(digits_run, tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    assert export(digits_run, out) == 2
    assert "is a file" in capsys.readouterr().err and out.read_text() == "mine"


@pytest.mark.parametrize("where", ["run", "parent"])
@pytest.mark.exports
@pytest.mark.trains
def test_the_run_folder_or_its_parent_is_never_an_out(digits_run, where, capsys):
    out = digits_run if where == "run" else digits_run.parent
    before = snapshot(out)
    assert export(digits_run, out, "--force") == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "run folder" in error[0]
    assert snapshot(out) == before


@pytest.mark.exports
@pytest.mark.trains
def test_an_earlier_bundle_is_replaced_only_by_a_whole_one(digits_run, tmp_path, monkeypatch, capsys):
    out = tmp_path / "bundle"
    assert export(digits_run, out) == 0
    before = snapshot(out)
    monkeypatch.setitem(sys.modules, "litert_torch", None)     # this export fails half-way: no tflite converter
    assert main(["export", str(digits_run), "--format", "tflite", "--out", str(out)]) == 2
    assert "litert_torch" in capsys.readouterr().err
    assert snapshot(out) == before                              # the earlier bundle, untouched
    Privatizer.load(out)
    assert sorted(os.listdir(tmp_path)) == ["bundle"]
    assert export(digits_run, out) == 0                         # an earlier bundle is replaced without --force
    Privatizer.load(out)


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_two_exports_into_one_out_cannot_both_run(digits_run, tmp_path, capsys):
    out = tmp_path / "bundle"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    first = subprocess.Popen([sys.executable, "-m", "sensorveil", "export", str(digits_run), "--format", "onnx",
                              "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(name.startswith(".bundle.export-") and name != ".bundle.export-lock"
                      for name in os.listdir(tmp_path)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first export never started writing"
            time.sleep(0.05)
        assert export(digits_run, out) == 2                     # the second is refused while the first writes
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and "another export" in error[0]
        stdout, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stderr                         # the first one's work was not removed
    Privatizer.load(out)
    assert sorted(os.listdir(tmp_path)) == ["bundle"]
