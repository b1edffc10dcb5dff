"""The console script and the benchmark as a user runs them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sensorveil.cli import main


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_reports_latency_fps_flops_and_runtime_overhead(digits_bundle, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["benchmark", str(digits_bundle), "--frames", "30", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    [row] = report["rows"]
    for key in ("runtime_p50_ms", "runtime_p95_ms", "runtime_p99_ms", "runtime_fps", "raw_onnxruntime_p50_ms",
                "overhead_ratio_p50", "flops_torch", "flops_onnx", "params"):
        assert row[key] > 0, key
    assert row["runtime_p50_ms"] <= row["runtime_p95_ms"] <= row["runtime_p99_ms"]
    assert report["flops_onnx_graph"] == row["flops_torch"]
    assert (tmp_path / "bench.md").read_text().startswith("# sensorveil benchmark")
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "overhead_ratio_p50" in (tmp_path / "bench.md").read_text()   # every figure, in the files


def table_rows(printed: str) -> dict:
    """{(format, precision): row cells} of the printed summary table."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Format "))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = line.split()
        rows[(cells[0], cells[1])] = cells
    return rows


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_prints_one_readable_row_per_backend(digits_bundle, capsys):
    assert main(["benchmark", str(digits_bundle), "--frames", "20", "--attacker-epochs", "1"]) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= 100
    header = next(line for line in printed.splitlines() if line.startswith("Format "))
    assert header.split() == ["Format", "Precision", "Backend", "Status", "Size", "Private", "Useful", "p50",
                              "ms", "FPS", "Overhead"]
    [(key, cells)] = table_rows(printed).items()
    assert key == ("onnx", "fp32") and cells[2:4] == ["onnxruntime", "validated"]
    assert 0 <= float(cells[6]) <= 1 and 0 <= float(cells[7]) <= 1   # measured on this artefact
    assert "Attackers trained 1 epochs" in printed


@pytest.mark.trains
def test_benchmark_formats_exports_each_format_and_says_why_one_cannot_run_here(digits_run, tmp_path,
                                                                                     capsys):
    out = tmp_path / "formats.json"
    assert main(["benchmark", str(digits_run), "--formats", "onnx:fp32,tensorrt", "--bundles", str(tmp_path / "b"),
                 "--frames", "20", "--attacker-epochs", "0", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = table_rows(printed)
    assert set(rows) == {("onnx", "fp32"), ("tensorrt", "fp16"), ("tensorrt", "int8")}
    assert rows[("onnx", "fp32")][3] == "validated" and rows[("onnx", "fp32")][6].endswith("*")   # the manifest's
    assert rows[("tensorrt", "fp16")][3:5] == ["exported", "[1]"]   # no TensorRT here: written, not run
    assert "[1] tensorrt fp16: exported: backend 'tensorrt' needs" in printed
    report = json.loads(out.read_text())
    assert [row["status"] for row in report["rows"]] == ["validated", "exported", "exported"]
    assert (tmp_path / "b" / "onnx-fp32" / "manifest.json").is_file()


def test_formats_take_a_format_or_a_format_and_precision():
    from sensorveil.benchmarks.formats import parse_formats
    assert parse_formats("onnx:fp32,tensorrt") == [("onnx", "fp32"), ("tensorrt", "fp16"), ("tensorrt", "int8")]
    assert ("onnx", "int8") in parse_formats("all") and ("tflite", "int8") in parse_formats(None)
    with pytest.raises(ValueError, match="onnx: fp32, int8"):
        parse_formats("onnx:fp16")


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_formats_needs_a_run_directory(digits_bundle, capsys):
    assert main(["benchmark", str(digits_bundle), "--formats", "all"]) == 2
    assert "is not a run directory" in capsys.readouterr().err


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_versus_a_peer_needs_a_video_source(digits_bundle, capsys):
    # the peer runs on the frames the stream runs: no source, or a live one, cannot be replayed to it
    for extra in ([], ["--source", "synthetic-depth"]):
        assert main(["benchmark", str(digits_bundle), "--versus", "deface", *extra]) == 2
        assert "needs --source set to a video file" in capsys.readouterr().err


@pytest.mark.exports
@pytest.mark.trains
def test_evaluate_a_bundle_through_the_runtime(digits_bundle, tmp_path):
    out = tmp_path / "eval.json"
    report = tmp_path / "audit.md"
    assert main(["evaluate", str(digits_bundle), "--json", str(out), "--attacker-epochs", "2", "--seeds", "2",
                 "--report", str(report)]) == 0
    result = json.loads(out.read_text())
    assert result["backend"] == "onnxruntime" and result["seeds"] == 2
    for key in ("probing_acc_private", "protocol_acc_private", "random_star", "tree_acc_private"):
        assert 0 <= result[key] <= 1
    for family in ("neural", "trees", "logistic", "trees+useful"):
        figure = result["private"][family]
        assert figure["low"] <= figure["mean"] <= figure["high"] and len(figure["runs"]) == 2
    assert result["probing_acc_private"] == result["private"]["neural"]["mean"]
    assert "95% interval" in report.read_text() and report.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.trains
def test_errors_exit_2_with_one_line_that_says_what_was_expected(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "expected a run directory" in err and "Traceback" not in err
    assert main(["train", "prgan", "--dataset", "mnist-please"]) == 2
    assert "expected" in capsys.readouterr().err
    assert main(["quickstart", "--camera", str(tmp_path / "no-such-clip.avi"), "--out", str(tmp_path / "q")]) == 2
    assert "camera clip not found" in capsys.readouterr().err


def test_camera_quickstart_names_its_bundle_for_the_clip():
    """Two cameras' runs in one --out must not share (and overwrite) one pass-walkway bundle."""
    from sensorveil.quickstart import clip_slug

    assert clip_slug(Path("../shared/media/walkway.avi")) == "walkway"
    assert clip_slug(Path("/clips/Crowd Walkway_2.avi")) == "crowd-walkway-2"
    assert clip_slug(Path("/clips/___.mp4")) == "camera"


@pytest.mark.trains
def test_camera_quickstart_takes_the_camera_speed_to_the_export(tmp_path, monkeypatch):
    import sensorveil.quickstart as quickstart
    asked = {}
    monkeypatch.setattr(quickstart, "camera_quickstart", lambda out, clip, **options: asked.update(options))
    assert main(["quickstart", "--camera", str(tmp_path / "clip.avi"), "--camera-speed", "fast"]) == 0
    assert asked == {"person_detector": "ssdlite", "camera_speed": "fast", "bank": "rendered", "full_size": False}
    assert main(["quickstart", "--camera", str(tmp_path / "clip.avi")]) == 0 and asked["camera_speed"] == "recall"


def test_a_wide_clip_is_worked_at_the_working_width_unless_full_size_is_asked_for(tmp_path):
    import cv2

    from sensorveil.quickstart import WORKING_WIDTH, working_clip
    wide, narrow = tmp_path / "wide.avi", tmp_path / "narrow.avi"
    for path, size in ((wide, (1280, 720)), (narrow, (480, 360))):
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
        for k in range(3):
            writer.write(np.full((size[1], size[0], 3), 40 * k, np.uint8))
        writer.release()
    scaled = working_clip(wide, tmp_path / "clips")
    capture = cv2.VideoCapture(str(scaled))
    assert (capture.get(cv2.CAP_PROP_FRAME_WIDTH), capture.get(cv2.CAP_PROP_FRAME_HEIGHT)) == (WORKING_WIDTH, 360)
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 3
    assert working_clip(wide, tmp_path / "clips", full_size=True) == wide
    assert working_clip(narrow, tmp_path / "clips") == narrow


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_console_script_help_lists_the_contract_verbs():
    out = subprocess.run([sys.executable, "-m", "sensorveil", "--help"], capture_output=True, text=True, check=True)
    for verb in ("quickstart", "train", "evaluate", "export", "benchmark"):
        assert verb in out.stdout


@pytest.mark.slow
@pytest.mark.boots
@pytest.mark.trains
def test_quickstart_end_to_end(tmp_path):
    # the limit is a hang guard, not a speed goal: 90 s on a quiet 2-core machine, far more on a shared one
    result = subprocess.run([sys.executable, "-m", "sensorveil", "quickstart", "--out", str(tmp_path), "--epochs", "3"],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-2000:]
    table = result.stdout[result.stdout.index("== sensorveil quickstart"):result.stdout.index("  bundles")]
    assert all(len(line) <= 100 for line in table.splitlines())     # the table and verdicts; paths may be long
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["mechanisms"]) == {"pass", "prgan"}
    for name, row in summary["mechanisms"].items():
        figure = row["attacker_accuracy"]
        assert figure["low"] <= figure["mean"] <= figure["high"] and row["fps"] > 0
        assert (tmp_path / "bundles" / f"{name}-digits" / "manifest.json").is_file()
        assert name in table and Path(row["audit_report"]).is_file()
    assert (tmp_path / "digits_raw_vs_privatized.png").read_bytes()[:4] == b"\x89PNG"



def test_train_help_names_every_registered_dataset():
    from sensorveil.cli.train import DATASET_NAMES
    from sensorveil.sdk.datasets import DATASETS
    assert sorted(DATASET_NAMES) == sorted(DATASETS)


def test_a_camera_stream_is_not_read_against_the_per_crop_table():
    """The table times one crop through the model; a camera frame finds people and runs one call per person,
    so '0.02x the table's FPS' would read as a fault. The camera line says why it is no bound instead."""
    from sensorveil.cli.benchmark import stream_line
    row = {"format": "onnx", "precision": "fp32", "stream_fps": 60.0, "stream_cpu_ms_per_frame": 16.0,
           "runtime_p50_ms": 0.5, "fps": 1200.0}
    assert "0.05x the table's FPS (1,200" in stream_line("clip.avi", row)    # like with like: FPS over FPS
    camera = stream_line("clip.avi", {**row, "stream_preprocessor": "person-crops"})
    assert "x the table's FPS" not in camera and "people new to the tracker" in camera


@pytest.mark.exports
@pytest.mark.trains
def test_the_device_report_is_named_after_the_detected_device(digits_bundle, tmp_path, capsys):
    from sensorveil.benchmarks.stream_bench import detected_device
    assert main(["benchmark", str(digits_bundle), "--frames", "20", "--device-report", str(tmp_path / "r")]) == 0
    reports = list((tmp_path / "r").glob(f"{detected_device()['name']}-*.json"))
    assert len(reports) == 1 and reports[0].with_suffix(".md").is_file()
    assert f"report: {reports[0]}" in capsys.readouterr().out
    assert main(["benchmark", str(digits_bundle), "--json", str(tmp_path / "x.json"), "--device-report",
                 str(tmp_path)]) == 2
    assert "drop --json" in capsys.readouterr().err
