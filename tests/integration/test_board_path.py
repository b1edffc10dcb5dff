"""The path onto a board, as a board owner walks it: keys that git ignores, the backend that
ran named, an Edge TPU compile that works with or without the compiler here, one FPS, no announced file
that was not written, and a preview without GUI support that says what to use instead."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sensorveil.cli import main

REPO = Path(__file__).resolve().parents[2]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
pytest.importorskip("cryptography", reason="keys generate needs the sign extra (cryptography)")


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@needs_git
@pytest.mark.boots
def test_the_readme_key_folder_is_ignored_by_this_repository():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    assert subprocess.run(["git", "check-ignore", "-q", "keys/signer.key"], cwd=REPO).returncode == 0


@needs_git
@pytest.mark.boots
def test_keys_generate_warns_when_git_would_commit_the_private_key(tmp_path, capsys):
    project = git_init(tmp_path / "project")
    assert main(["keys", "generate", "--out", str(project / "keys")]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "signer.key" in err and "keys/" in err and ".gitignore" in err


@needs_git
@pytest.mark.boots
def test_keys_generate_is_quiet_where_git_ignores_the_key_or_there_is_no_git(tmp_path, capsys):
    project = git_init(tmp_path / "project")
    (project / ".gitignore").write_text("keys/\n")
    assert main(["keys", "generate", "--out", str(project / "keys")]) == 0
    assert "warning" not in capsys.readouterr().err
    outside = tmp_path / "not-a-repo" / "keys"
    assert main(["keys", "generate", "--out", str(outside)]) == 0
    assert "warning" not in capsys.readouterr().err


# -- the Edge TPU compile, with a stand-in compiler: the real one ships for x86-64 Debian/Ubuntu only --------
FAKE_COMPILER = """#!/bin/sh
# stand-in for Coral's edgetpu_compiler -s -o OUT MODEL: copies MODEL to OUT/NAME_edgetpu.tflite, writes its log
out=""; model=""
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift 2;; -s) shift;; *) model=$1; shift;; esac; done
name=$(basename "$model" .tflite)
cp "$model" "$out/${name}_edgetpu.tflite" && echo "stand-in" > "$out/${name}_edgetpu.log"
echo "Model compiled successfully (stand-in: a copy)"
"""


@pytest.fixture
def fake_compiler(tmp_path, monkeypatch):
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    (folder / "edgetpu_compiler").write_text(FAKE_COMPILER)
    (folder / "edgetpu_compiler").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return folder


@pytest.fixture
def no_compiler(monkeypatch):
    if shutil.which("edgetpu_compiler"):
        pytest.skip("the real edgetpu_compiler is installed here")


def coral_export(run, out, **options):
    pytest.importorskip("ai_edge_litert", reason="the tflite export needs the export-tflite extra")
    from sensorveil.export import export_run
    return export_run(run, None, out, target="coral-usb", calibration=16, int8_check=False, **options)


def edgetpu_graph(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())["artifacts"]["edgetpu"]["graphs"]["model"]


@pytest.mark.exports
@pytest.mark.trains
def test_export_runs_the_compiler_when_installed_and_lists_the_compiled_model(digits_run, tmp_path, fake_compiler):
    from sensorveil.runtime.bundle import open_bundle
    bundle = coral_export(digits_run, tmp_path / "coral")
    entry = edgetpu_graph(bundle)
    assert entry["compiled"] is True and entry["file"] == "model_int8_edgetpu.tflite"
    assert "model_int8_edgetpu.tflite" in open_bundle(bundle).manifest["files"]
    assert not list(bundle.glob("*.log"))     # the compiler's log is not part of the bundle


@pytest.mark.exports
@pytest.mark.trains
def test_without_the_compiler_the_printed_next_step_compiles_lists_and_re_signs(digits_run, tmp_path, capsys,
                                                                                no_compiler, monkeypatch):
    from sensorveil.runtime import Privatizer
    assert main(["keys", "generate", "--out", str(tmp_path / "keys")]) == 0
    bundle = coral_export(digits_run, tmp_path / "coral", sign_key=tmp_path / "keys" / "signer.key")
    entry = edgetpu_graph(bundle)
    assert entry["compiled"] is False
    assert entry["compile_command"] == f"sensorveil devices compile {bundle}"
    assert entry["compile_command"] in capsys.readouterr().err    # said at export, not only in the manifest
    # what the walk-through did: edgetpu_compiler by hand into the bundle, an unlisted file the runtime refuses
    (bundle / "model_int8_edgetpu.tflite").write_bytes((bundle / "model_int8.tflite").read_bytes())
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "edgetpu_compiler").write_text(FAKE_COMPILER)
    (fake / "edgetpu_compiler").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    assert main(entry["compile_command"].split()[1:]) == 2          # signed: it asks for the key, changes nothing
    assert "--sign KEY" in capsys.readouterr().err and edgetpu_graph(bundle)["compiled"] is False
    assert main(entry["compile_command"].split()[1:] + ["--sign", str(tmp_path / "keys" / "signer.key")]) == 0
    entry = edgetpu_graph(bundle)
    assert entry["compiled"] is True and entry["file"] == "model_int8_edgetpu.tflite"
    privatizer = Privatizer.load(bundle, backend="litert", trusted_keys=[tmp_path / "keys" / "signer.pub"])
    assert privatizer.signature["status"] == "trusted"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bin", "coral", "keys"]   # no staging left


@pytest.mark.exports
@pytest.mark.trains
def test_auto_says_why_it_runs_an_edge_tpu_bundle_on_the_cpu(digits_run, tmp_path, monkeypatch, no_compiler):
    from sensorveil.runtime import Privatizer, backends
    bundle = coral_export(digits_run, tmp_path / "coral")
    monkeypatch.setattr(backends, "_detected_backends", lambda: [])
    privatizer = Privatizer.load(bundle)
    assert privatizer.backend_name == "litert"
    assert privatizer.backend_why == "auto: edgetpu: no Coral Edge TPU detected; running on the CPU"
    monkeypatch.setattr(backends, "_detected_backends", lambda: ["edgetpu"])     # a Coral plugged in
    privatizer = Privatizer.load(bundle)
    assert privatizer.backend_name == "litert" and "edgetpu: model not compiled" in privatizer.backend_why
    assert Privatizer.load(bundle, backend="litert").backend_why == "as asked; running on the CPU"


@pytest.mark.exports
@pytest.mark.trains
def test_run_names_the_backend_on_the_console_and_in_its_json(digits_run, tmp_path, capsys, no_compiler):
    bundle = coral_export(digits_run, tmp_path / "coral")
    capsys.readouterr()
    assert main(["run", str(bundle), "--source", "synthetic-depth", "--frames", "5",
                 "--json", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert "backend: litert (auto: edgetpu: no Coral Edge TPU detected; running on the CPU)" in out
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["backend"] == "litert" and "no Coral Edge TPU detected" in report["backend_why"]


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_report_names_the_backend_that_ran_and_the_one_that_did_not(digits_run, tmp_path, capsys,
                                                                              no_compiler):
    bundle = coral_export(digits_run, tmp_path / "coral")
    assert main(["benchmark", str(bundle), "--backend", "all", "--frames", "20", "--attacker-epochs", "0",
                 "--json", str(tmp_path / "bench.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())     # the terminal table wraps its footer
    markdown = " ".join((tmp_path / "bench.md").read_text().split())
    for text in (out, markdown):
        assert "Backend litert: as asked; running on the CPU." in text
        assert "Not run: edgetpu:" in text and "sensorveil devices compile" in text
    assert json.loads((tmp_path / "bench.json").read_text())["rows"][0]["backend_why"]


# -- one FPS, and no file announced that was not written ----------------------------------------------------
def test_fps_has_one_definition_in_the_guide_the_report_and_the_stream_ratio():
    from sensorveil.benchmarks.report import summary_footer
    from sensorveil.cli.benchmark import stream_line
    guide = " ".join((REPO / "docs" / "guides" / "benchmarks.md").read_text().split())
    footer = " ".join(summary_footer({"rows": []}))
    assert "1000 / the mean call" in guide and "1000 / the mean call" in footer and "1000 / p50" not in guide
    row = {"format": "onnx", "precision": "fp32", "stream_fps": 609.5, "runtime_p50_ms": 0.033, "fps": 1451.0}
    assert "0.42x the table's FPS" in stream_line("synthetic-depth", row)    # the walk-through's 0.02x


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_without_matplotlib_does_not_announce_the_png(depth_bundle, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib raises ImportError
    assert main(["benchmark", str(depth_bundle), "--frames", "10", "--attacker-epochs", "0",
                 "--json", str(tmp_path / "bench.json")]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "bench.png").exists()
    assert f"{tmp_path / 'bench.md'}; no {tmp_path / 'bench.png'}: matplotlib is not installed" in out


# -- a preview window where none can open ------------------------------------------------------------------
@pytest.mark.exports
@pytest.mark.trains
def test_preview_without_a_window_says_headless_or_web_in_one_line(depth_bundle, capsys):
    cv2 = pytest.importorskip("cv2", reason="the preview needs OpenCV")
    from sensorveil.runtime.preview import window_missing
    if window_missing(cv2) is None:
        pytest.skip("this machine can open a preview window")
    assert main(["preview", str(depth_bundle), "--source", "synthetic-depth", "--frames", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--headless --out" in err[0] and "--web" in err[0] and "cmake" not in err[0]


def test_a_gui_opencv_without_a_display_is_found_before_it_can_abort():
    from types import SimpleNamespace

    from sensorveil.runtime.preview import window_missing
    gui = SimpleNamespace(getBuildInformation=lambda: "  GUI:                           GTK3\n")
    assert "no display" in window_missing(gui, environ={}, system="Linux")
    assert window_missing(gui, environ={"DISPLAY": ":0"}, system="Linux") is None
    headless = SimpleNamespace(getBuildInformation=lambda: "  GUI:                           NONE\n")
    assert "without GUI support" in window_missing(headless, environ={"DISPLAY": ":0"}, system="Linux")


# -- no silence over 30 seconds ------------------------------------------------------------------------------
def test_a_heartbeat_speaks_only_when_the_work_is_silent():
    import time

    from sensorveil.export.heartbeat import Heartbeat
    lines = []
    with Heartbeat("quiet work", lines.append, every=0.1):
        time.sleep(0.35)
    assert 2 <= sum("quiet work: still working" in line for line in lines) <= 4
    lines.clear()
    with Heartbeat("chatty work", lines.append, every=0.2) as beat:
        for step in range(6):
            beat.say(f"step {step}")
            time.sleep(0.05)
    assert lines == [f"step {step}" for step in range(6)]


def test_the_int8_privacy_check_says_what_it_does_and_keeps_talking(monkeypatch, capsys):
    """The walk-through's six silent minutes after 'int8 calibration: 200 of 200' were this audit."""
    import time

    from sensorveil.export import heartbeat, validate
    from sensorveil.sdk import assess

    def slow_audit(path, backend="auto", seeds=3, attacker_epochs=20, log=None):
        log("audit: 1/2 linear attacker, seed 0")
        time.sleep(0.3)
        raise validate.BackendUnavailableError("stand-in: no audit here")
    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.1)
    monkeypatch.setattr(assess, "audit_path", slow_audit)
    record = validate.int8_privacy_record("bundle", "onnxruntime", "run", attacker_epochs=1)
    err = capsys.readouterr().err
    assert record["status"] == "skipped"
    assert "int8 privacy check (onnxruntime): the audit of the fp32 model" in err
    assert "int8 privacy check, fp32 model: audit: 1/2" in err and "still working" in err
