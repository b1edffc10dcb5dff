"""scripts/count_oracle.py: people pasted as the camera filmed their boxes, on the released scene, clipped to the
frame, with and without their surroundings."""
import numpy as np

from tests.conftest import load_script


def test_a_box_as_filmed_takes_the_frames_pixels_there_and_the_scene_elsewhere():
    script = load_script("count_oracle")
    frame = np.arange(20 * 30, dtype=np.uint8).reshape(20, 30)
    scene = np.zeros_like(frame)
    out = script.boxes_as_filmed(scene, frame, [(5, 4, 3, 6)])
    assert np.array_equal(out[4:10, 5:8], frame[4:10, 5:8])
    out[4:10, 5:8] = 0
    assert not out.any() and not scene.any()        # nothing else of the frame, and the scene left as it was


def test_a_box_past_the_frame_is_clipped_and_one_outside_it_pastes_nothing():
    script = load_script("count_oracle")
    frame = np.full((10, 10, 3), 200, dtype=np.uint8)
    out = script.boxes_as_filmed(np.zeros_like(frame), frame, [(-3, 7, 6, 8), (40, 40, 5, 5)])
    assert out[7:, :3].min() == 200 and out.sum() == 200 * 3 * 3 * 3


def test_grown_adds_a_quarter_of_the_size_each_way_rounded_up():
    script = load_script("count_oracle")
    assert script.grown([(10, 20, 8, 16)]).tolist() == [[8, 16, 12, 24]]
    assert script.grown([(10, 20, 5, 9)]).tolist() == [[8, 17, 9, 15]]
    assert script.grown([(10, 20, 8, 16)], 0.0).tolist() == [[10, 20, 8, 16]]


def test_only_the_boxes_a_counter_found_are_kept_one_found_box_for_one_person():
    script = load_script("count_oracle")
    boxes = [(100, 50, 30, 80), (104, 52, 30, 80), (300, 50, 30, 80)]
    assert script.matched_rows(boxes, [(102, 51, 30, 80)]).sum() == 1           # two people, one box found
    assert script.matched_rows(boxes, [(300, 50, 30, 80)]).tolist() == [False, False, True]
    assert not script.matched_rows(boxes, []).any() and len(script.matched_rows([], [(1, 1, 5, 5)])) == 0


def test_the_page_shows_the_goals_counters_only_with_their_cells():
    script = load_script("count_oracle")
    count = {"same_count": 0.5, "floor_same_count": 0.8, "holds": False, "released_more": 0.1,
             "released_fewer": 0.4, "raw_people": 1200, "released_people": 900}
    figures = {"count": {"independent": dict(count, in_goal=True), "motion": dict(count, in_goal=False)},
               "pasted": 8, "in_release": 6, "in_raw": 8}
    case = {"bundle": "b", "clip": "c", "still": "still.png", "pastes": {"own_boxes": figures}}
    text = "\n".join(script.case_lines("walkway", case))
    assert "| independent | 50.0% (80.0%) | no | 10.0%, 40.0% | 1,200, 900 |" in text
    assert "motion" not in text and "scene still `still.png`" in text
    assert "75.0% of 8 pasted, in the release; the same places in the raw frames: 100.0%" in text
