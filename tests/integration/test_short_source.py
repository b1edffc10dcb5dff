"""A benchmark asked for more frames than its source holds says so and records the frames it measured."""
import numpy as np
import pytest

pytestmark = [pytest.mark.exports, pytest.mark.trains]


def short_clip(path, frames=41):
    import cv2
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25, (64, 48))
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    return path


def test_frames_beyond_the_clip_warn_and_the_report_records_the_frames_measured(digits_bundle, tmp_path):
    from sensorveil.benchmarks.stream_bench import add_stream_and_estimates, benchmark_stream
    clip = str(short_clip(tmp_path / "short.avi"))
    with pytest.warns(UserWarning, match="asked for 300 timed frames, the source gave 31"):
        report = benchmark_stream(digits_bundle, clip, backend="onnxruntime", frames=300)
    assert report["timed_frames"] == 31 and report["frames_asked"] == 300
    result = {"rows": [{"backend": "onnxruntime", "flops_onnx": None}]}
    with pytest.warns(UserWarning):
        add_stream_and_estimates(result, digits_bundle, clip, frames=300)
    assert result["stream_frames"] == 31 and result["stream_frames_asked"] == 300
