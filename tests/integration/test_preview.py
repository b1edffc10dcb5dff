"""The preview demo, headless: it writes the three-panel view to a video and a contact sheet."""
from __future__ import annotations

import pytest

from tests.conftest import WALKWAY

pytestmark = [pytest.mark.exports, pytest.mark.trains]

cv2 = pytest.importorskip("cv2", reason="the preview needs OpenCV (pip install opencv-python-headless)")


def video_facts(path):
    capture = cv2.VideoCapture(str(path))
    count = 0
    while True:
        ok, image = capture.read()
        if not ok:
            break
        size = (image.shape[1], image.shape[0])
        count += 1
    capture.release()
    return count, size


def test_headless_preview_on_walkway_writes_every_frame_at_the_view_size(depth_bundle, tmp_path, capsys):
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    from sensorveil.cli import main
    out = tmp_path / "preview.mp4"
    code = main(["preview", str(depth_bundle), "--source", str(WALKWAY), "--headless", "--out", str(out),
                 "--frames", "40"])
    assert code == 0
    frames, size = video_facts(out)
    assert frames == 40
    assert size == (3 * 320, 320 + 28)        # raw | privatized | difference, 320 px panels + overlay strip
    sheet = cv2.imread(str(out.with_suffix(".png")))
    assert sheet is not None and sheet.shape[1] == 3 * 480
    assert "wrote" in capsys.readouterr().out


def test_headless_preview_of_depth_colour_maps_the_patch(depth_bundle, tmp_path):
    import numpy as np

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.preview import preview
    from sensorveil.runtime.sources import open_source
    out = tmp_path / "depth.mp4"
    with open_source("synthetic-depth:3", loop_frames=3, frames=6) as source:
        report = preview(Privatizer.load(depth_bundle), source, out=out, headless=True)
    assert report["frames_out"] == 6 and video_facts(out) == (6, tuple(report["video_size"]))
    capture = cv2.VideoCapture(str(out))
    _, image = capture.read()
    capture.release()
    raw_panel = image[28:, :320].astype(int)
    assert np.abs(raw_panel[..., 0] - raw_panel[..., 2]).mean() > 20   # coloured, not grey


def test_headless_without_out_is_a_clear_error(depth_bundle, capsys):
    from sensorveil.cli import main
    assert main(["preview", str(depth_bundle), "--source", "synthetic-depth", "--headless"]) == 2
    assert "--headless needs --out" in capsys.readouterr().err


def test_window_mode_without_gui_support_says_how_to_run_headless(depth_bundle):
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.errors import BackendUnavailableError
    from sensorveil.runtime.preview import preview
    from sensorveil.runtime.sources import open_source
    try:
        cv2.namedWindow("probe")
        cv2.destroyAllWindows()
        pytest.skip("this OpenCV can open windows; the interactive preview is checked by hand")
    except cv2.error:
        pass
    with open_source("synthetic-depth:1", loop_frames=1, frames=1) as source:
        with pytest.raises(BackendUnavailableError, match="--headless --out"):
            preview(Privatizer.load(depth_bundle), source)
