"""sensorveil scene-still: a bundle that cannot find the people to leave out is refused with one error naming it
(the still would keep whoever stood still), and nothing is written. The still made with the learned detector, and
a clip that cannot be read, are checked in test_person_detector.py (the detector step)."""
import os
from pathlib import Path

from sensorveil.cli import main

REPO = Path(__file__).resolve().parents[2]
DIGITS_BUNDLE = REPO / "tests" / "fixtures" / "schema1-pass-digits-onnx"
WALKWAY = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared")) / "media" / "walkway.avi"


def test_a_bundle_without_the_person_detector_is_refused_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "still.png"
    assert main(["scene-still", str(DIGITS_BUNDLE), "--clip", str(WALKWAY), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{DIGITS_BUNDLE}: carries no learned person detector" in error and not out.exists()



def test_the_camera_quickstart_offers_a_still_only_where_the_count_fails_and_a_detector_can_make_one():
    from sensorveil.quickstart import scene_still_hint

    def summary(count_holds):
        return {"bundle": "out/bundles/pass-cam", "goal": {"parts": {"count": {"holds": count_holds, "why": "-"}}}}
    hint = scene_still_hint(summary(False), Path("cam.avi"), has_detector=True)
    assert "sensorveil scene-still out/bundles/pass-cam --clip cam.avi --out still.png" in hint
    assert "look at it" in hint and "--scene-still still.png" in hint
    assert scene_still_hint(summary(True), Path("cam.avi"), has_detector=True) is None
    assert scene_still_hint(summary(None), Path("cam.avi"), has_detector=True) is None
    assert scene_still_hint(summary(False), Path("cam.avi"), has_detector=False) is None
