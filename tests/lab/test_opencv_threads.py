"""scripts/opencv_threads.py: each setting streams as asked, the shipped setting comes back, and the page's share
is each setting's CPU against the pool's."""
import pytest

from tests.conftest import load_script

pytest.importorskip("cv2")

from sensorveil.runtime.camera import pipeline  # noqa: E402


def test_each_round_streams_each_setting_and_the_shipped_setting_comes_back(monkeypatch, tmp_path):
    from sensorveil.benchmarks import stream_bench

    script = load_script("opencv_threads")
    seen = []

    def streamed(bundle, clip, backend, frames):     # what the stream would run with, not a stream
        seen.append((bundle, pipeline.PersonCrops.opencv_threads))
        return {"cpu_ms_per_frame": 10.0 if pipeline.PersonCrops.opencv_threads is None else 8.0, "fps": 100.0}

    monkeypatch.setattr(stream_bench, "benchmark_stream", streamed)
    figures = script.rounds([tmp_path / "fast"], tmp_path / "clip.avi", 50, 2)
    assert [threads for _, threads in seen] == [1, None, 1, None]
    assert pipeline.PersonCrops.opencv_threads == pipeline.OPENCV_THREADS == 1
    result = {"clip": "clip.avi", "frames": 50, "rounds": 2, "figures": figures}
    text = script.page(result, {"command": "python scripts/opencv_threads.py", "date": "d", "host": "h",
                                "commit": "c"})
    assert "| calling thread (as shipped) | 8.00 (8.00-8.00) | 100.0 (100.0-100.0) | -20.0% |" in text
    assert "| OpenCV's own pool | 10.00 (10.00-10.00) | 100.0 (100.0-100.0) | +0.0% |" in text
