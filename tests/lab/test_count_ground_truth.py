"""scripts/count_ground_truth.py: a MOTChallenge ground truth read as people per frame, and each counter's count of
raw, JPEG 90 and the release scored against it."""
import numpy as np

from sensorveil.benchmarks.ground_truth import ground_truth, people_in_frame
from tests.conftest import load_script


def test_a_person_counts_in_a_frame_where_their_box_centre_is_and_frames_without_people_count_zero(tmp_path):
    gt = tmp_path / "gt.txt"
    # frame 1: one person in view and one whose box centre has walked out past the right edge; frame 3: one
    gt.write_text("1,1,10,10,20,40,1,-1,-1,-1\n1,2,760,10,30,40,1,-1,-1,-1\n3,1,100,200,20,40,1,-1,-1,-1\n")
    people = ground_truth(gt, (768, 576), (480, 360))
    assert set(people) == {0, 2} and np.allclose(people[0][1][0], 20 * 480 / 768)
    assert people_in_frame(people, (480, 360), 4) == {0: 1, 1: 0, 2: 1, 3: 0}


def count(raw_same, released_same, raw_error, released_error, holds=False):
    out = {"counter": "a counter", "in_goal": True, "reference_frames": 10, "reference_people": 40,
           "raw_people": 38, "floor_people": 38, "released_people": 41, "same_count": 0.4, "floor_same_count": 0.8,
           "holds": holds}
    for video, same, error in (("raw", raw_same, raw_error), ("floor", raw_same, raw_error),
                               ("released", released_same, released_error)):
        out[f"{video}_same_as_reference"], out[f"{video}_same_as_reference_interval"] = same, [same - .1, same + .1]
        out[f"{video}_error_vs_reference"], out[f"{video}_error_vs_reference_interval"] = error, [error - .1,
                                                                                                 error + .1]
    return out


def test_the_page_says_which_count_is_nearer_the_truth_only_when_the_intervals_part():
    script = load_script("count_ground_truth")
    assert "nearer the ground truth" in script.nearer_text("independent", count(0.3, 0.5, 1.2, 0.6))
    assert "further from the ground truth" in script.nearer_text("independent", count(0.5, 0.3, 0.6, 1.2))
    assert "as near the ground truth" in script.nearer_text("pipeline", count(0.5, 0.5, 0.60, 0.65))
    result = {"clip": "walkway.avi", "bundle": "pass-walkway", "source": "a gt.txt", "scene_still_note": None,
              "draw_seed": 0, "count": {"independent": count(0.3, 0.5, 1.2, 0.6)}}
    text = script.page(result, {"command": "python scripts/count_ground_truth.py", "generated": "now",
                                "machine": "here", "commit": "abc", "dirty": False})
    assert "| independent | release | 50.0% [40.0%, 60.0%] | 0.60 [0.50, 0.70] | 41 |" in text
    assert "neutral scene" in text and all(len(line) <= 120 for line in text.splitlines() if line.startswith("|"))
