"""scripts/board_estimates.py: its arithmetic against an independent computation on made-up profiles, the
published detector figures the board profiles carry (each with its source), and, where the learned person
detector's ONNX is cached, the page from the real detector's FLOPs."""
from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from sensorveil import devices
from sensorveil.benchmarks.stream_bench import reference_macs

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "board_estimates.py"
# the boards given a published SSD-MobileNet-V2 300x300 figure; jetson-orin-nano has none that was found
BOARDS_WITH_FIGURES = {"jetson-nano", "coral-devboard", "coral-usb", "rpi4-cpu", "rpi5-cpu", "rpi3-ncs2", "rpi4-ncs2"}


@pytest.fixture(scope="module")
def script():
    return SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="board_estimates_script"))


def test_arithmetic_against_an_independent_computation(script):
    profiles = [
        {"name": "fast", "reference_throughput": [
            {"model": "a classifier", "fps": 900.0, "source": "s0"},      # not a detector: ignored
            {"model": "det", "kind": "detector", "latency_ms": 25.0, "fps": 40.0, "model_gflops": 3.0,
             "source": "s1", "model_gflops_source": "g1"}]},
        {"name": "slow", "reference_throughput": [
            {"model": "det", "kind": "detector", "fps": 2.5, "model_gflops": 0.5, "source": "s2"}]},
        {"name": "none", "reference_throughput": [], "reference_throughput_note": "nothing published"},
    ]
    detector_flops, every = 1.5e9, 4
    result = script.estimate(profiles, detector_flops, every)
    rows = {row["board"]: row for row in result["rows"]}
    assert set(rows) == {"fast", "slow"}
    assert result["missing"] == [{"board": "none", "note": "nothing published"}]
    # fast: 40 calls/s of 3 GFLOP = 120 GFLOP/s; / 1.5 GFLOP = 80 calls/s = 12.5 ms; x 4 / 2 tiles = 160
    # frames/s with one tile row (two square tiles on 4:3), x 4 / 8 tiles = 40 with two rows
    assert rows["fast"]["implied_gflops_per_s"] == pytest.approx(120.0)
    assert rows["fast"]["est_calls_per_s"] == pytest.approx(80.0)
    assert rows["fast"]["est_ms_per_call"] == pytest.approx(12.5)
    assert rows["fast"]["est_pipeline_ceiling_fps"] == pytest.approx(160.0)
    assert rows["fast"]["est_pipeline_ceiling_fps_two_rows"] == pytest.approx(40.0)
    assert rows["fast"]["published_ms"] == 25.0 and rows["fast"]["source"] == "s1"
    # slow: 2.5 x 0.5 = 1.25 GFLOP/s; / 1.5 = 0.8333 calls/s = 1200 ms; x 4 = 3.333 frames/s
    assert rows["slow"]["est_calls_per_s"] == pytest.approx(2.5 * 0.5 / 1.5)
    assert rows["slow"]["est_ms_per_call"] == pytest.approx(1200.0)
    assert rows["slow"]["published_ms"] == pytest.approx(400.0)     # from fps where no latency is given
    assert rows["slow"]["est_pipeline_ceiling_fps"] == pytest.approx(4 * 2.5 * 0.5 / 1.5 / 2)
    assert all(row["label"].startswith("ESTIMATE") for row in rows.values())


def test_the_rendered_page_says_estimate_and_names_the_missing(script):
    profiles = [{"name": "fast", "reference_throughput": [
        {"model": "det", "kind": "detector", "fps": 40.0, "model_gflops": 3.0, "source": "s1",
         "model_gflops_source": "g1"}]}, {"name": "none", "reference_throughput": []}]
    result = {**script.estimate(profiles, 1.5e9, 3),
              "provenance": {"command": "python scripts/board_estimates.py", "date": "d", "host": "h",
                             "commit": "abc", "dirty": False},
              "detector": {"path": "x.onnx", "flops": 1.5e9, "every": 3, "counted": "c"},
              "same_count": {**script.SAME_COUNT, "factor": 1.5 / script.SAME_COUNT["gflops"]}}
    page = script.render(result)
    assert "estimates from published figures, not measurements" in page
    assert "| fast [1] | 25.0 | 40.0 | 120.0 | 12.5 | 80.0 | 120 | 30 |" in page
    assert "2 runs with 1 tile row, 8 runs with 2 tile rows" in page
    assert "- none: its profile has no published detector figure" in page
    assert max(len(line) for line in page.splitlines() if line.startswith("|")) <= 110


@pytest.mark.parametrize("name", sorted(BOARDS_WITH_FIGURES))
def test_each_added_detector_figure_has_its_source(name, script):
    ref = script.detector_reference(devices.load_profile(name))
    assert ref is not None, name
    assert ref["source"].strip() and "http" in ref["source"]
    assert ref["model_gflops"] > 0 and "http" in ref["model_gflops_source"]
    assert ref["runtime"].strip() and ref["precision"].strip()
    assert ref["fps"] == pytest.approx(1000.0 / ref["latency_ms"], abs=0.01)
    # stream_bench's MAC-based estimate must not mistake it for one of its own reference models
    assert reference_macs(ref["model"]) is None


def test_no_other_profile_claims_a_detector_figure(script):
    found = {name for name in devices.list_profiles() if script.detector_reference(devices.load_profile(name))}
    assert found == BOARDS_WITH_FIGURES


# -- the real detector: needs its cached ONNX -----------------------------------------------------------
def test_page_from_the_cached_detector(script, tmp_path):
    pytest.importorskip("onnx")
    detector = script.find_detector()
    if detector is None:
        pytest.skip("the learned person detector's converter or weights are not installed, or it was never "
                    "converted: no cached detector.onnx under ~/.cache/sensorveil/person-detector/ssdlite-*/ "
                    "(tests/integration/test_person_detector.py converts it)")
    assert script.main(["--allow-dirty", "--docs", str(tmp_path), "--detector", str(detector)]) == 0
    result = json.loads((tmp_path / "board_estimates.json").read_text())
    assert 1.0e9 < result["detector"]["flops"] < 1.5e9      # SSDLite-MobileNetV2 at 300x300: about 1.23 GFLOP
    assert {row["board"] for row in result["rows"]} == BOARDS_WITH_FIGURES
    for row in result["rows"]:
        assert row["est_calls_per_s"] == pytest.approx(row["published_fps"] * row["published_model_gflops"] * 1e9
                                                       / result["detector"]["flops"])
    page = (tmp_path / "board_estimates.md").read_text()
    assert script.main(["--render-only", "--docs", str(tmp_path)]) == 0
    assert (tmp_path / "board_estimates.md").read_text() == page
