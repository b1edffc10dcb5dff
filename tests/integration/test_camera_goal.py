"""The camera goal (sensorveil.benchmarks.camera_goal): met only when every part holds, no verdict where a part
has no power; and the clip audit's own checks (sensorveil.benchmarks.clip_audit) on real frames."""
import numpy as np
import pytest

from sensorveil.benchmarks import camera_goal as goal
from sensorveil.benchmarks import clip_audit

PROTECTS = {"verdict": "protects", "why": "released rank-1 within 2x chance"}


def clip_figures(leaking=0, judged=50, caught=50, share=0.9, same=0.8, floor=0.85):
    counter = {"same_count": same, "floor_same_count": floor, "holds": same >= floor - clip_audit.COUNT_POINTS}
    return {"leak_meter": {"measured_boxes": judged, "control_caught_boxes": caught, "leaking_boxes": leaking,
                           "offline_boxes": 100},
            "recall": {"share": share, "interval": [share - 0.03, share + 0.03], "reference_people": 300,
                       "goal": clip_audit.RECALL_GOAL, "holds": share >= clip_audit.RECALL_GOAL,
                       "reference": "difference from the empty scene"},
            "count": {"pipeline": counter, "independent": counter}}


@pytest.mark.parametrize("clip, identity, expected", [
    (clip_figures(), PROTECTS, "goal met"),
    (clip_figures(leaking=1), PROTECTS, "goal not met"),
    (clip_figures(share=0.70), PROTECTS, "goal not met"),                 # half the crowd lost
    (clip_figures(same=0.60, floor=0.85), PROTECTS, "goal not met"),      # 25 points below JPEG-90's count
    (clip_figures(caught=10), PROTECTS, "no verdict"),                    # the leak meter cannot see a ghost
    (clip_figures(), {"verdict": "no power", "why": "raw rank-1 30%"}, "no verdict"),
    (clip_figures(), {"verdict": "leaks", "why": "rank-1 40%"}, "goal not met"),
    (None, PROTECTS, "no verdict"),                                       # no clip: not measured, not met
])
def test_the_camera_goal_is_met_only_when_every_part_holds(clip, identity, expected):
    result = goal.camera_goal(clip, identity)
    assert result["verdict"] == expected
    assert set(result["parts"]) >= {"identity"}
    assert "verdict: " + expected in goal.format_goal(result)


def test_a_counter_beside_the_goal_is_shown_and_not_judged():
    clip = clip_figures()
    clip["count"]["motion"] = {"same_count": 0.3, "floor_same_count": 0.85, "holds": False, "in_goal": False}
    result = goal.camera_goal(clip, PROTECTS)
    assert result["verdict"] == "goal met" and "motion 30.0% beside the goal" in result["parts"]["count"]["why"]
    clip["count"]["motion"]["in_goal"] = True       # the same counter judged: the goal fails on it
    assert goal.camera_goal(clip, PROTECTS)["verdict"] == "goal not met"


def test_boxes_read_on_values_from_before_the_person_are_said_beside_the_leaking_ones():
    clip = clip_figures()
    clip["leak_meter"]["held_boxes"] = 2
    leak = goal.camera_goal(clip, PROTECTS)["parts"]["leak_meter"]
    assert leak["holds"] and "0 leaking boxes" in leak["why"] and "2 more read as leaking on values" in leak["why"]
    clip["leak_meter"]["leaking_boxes"] = 1          # a leak beside them still fails the part
    assert goal.camera_goal(clip, PROTECTS)["verdict"] == "goal not met"


def test_a_failed_attribute_audit_fails_the_goal():
    assert goal.camera_goal(clip_figures(), PROTECTS, {"verdict": "leaks"})["verdict"] == "goal not met"
    assert goal.camera_goal(clip_figures(), PROTECTS, {"verdict": "protects"})["verdict"] == "goal met"


def walkway_frames(n):
    from tests.integration.test_camera import walkway
    return clip_audit.read_clip(walkway(), n)


def test_the_count_check_agrees_with_itself_and_sees_people_removed():
    frames = walkway_frames(60)
    from sensorveil.runtime.camera import MotionPeopleDetector
    factories = {"mog2": ("MOG2", lambda: MotionPeopleDetector().detect)}     # deterministic, unlike KNN
    same, emptied = clip_audit.CountCheck(factories), clip_audit.CountCheck(factories)
    for frame in frames:
        same.add(frame, frame.copy())
        emptied.add(frame, frames[0])          # a release that shows the first frame for ever: no one walks
    assert same.figures()["mog2"]["same_count"] == 1.0
    assert same.figures()["mog2"]["released_at_raw_people"] == same.figures()["mog2"]["raw_people"]
    figures = emptied.figures()["mog2"]
    assert figures["raw_people"] > 0 and figures["same_count"] < figures["floor_same_count"] - 0.1
    assert figures["released_at_raw_people"] < figures["raw_people"]
    assert not figures["holds"]
    # nobody walks in the release: it is off by counting fewer, never more
    assert same.figures()["mog2"]["released_more"] == same.figures()["mog2"]["released_fewer"] == 0.0
    assert figures["released_fewer"] == pytest.approx(1 - figures["same_count"]) and figures["released_more"] == 0


def test_the_count_check_says_whose_count_is_nearer_the_reference_people():
    frames = walkway_frames(40)
    from sensorveil.runtime.camera import MotionPeopleDetector
    factories = {"mog2": ("MOG2", lambda: MotionPeopleDetector().detect)}
    emptied, count = clip_audit.CountCheck(factories), MotionPeopleDetector()
    reference = {}
    for index, frame in enumerate(frames):
        emptied.add(frame, frames[0], index=index)
        if index % 4 == 0:          # the recall's frames: here, what a fresh counter of the raw frames counts
            reference[index] = len(count.detect(frame))
        else:
            count.detect(frame)
    figures = emptied.figures(reference)["mog2"]
    assert figures["reference_frames"] == 10 and figures["raw_same_as_reference"] == 1.0
    assert figures["released_same_as_reference"] < 1.0
    assert figures["raw_error_vs_reference"] == 0.0 < figures["released_error_vs_reference"]
    assert figures["reference_people"] == sum(reference.values())
    assert "reference_frames" not in emptied.figures()["mog2"]


def test_recall_counts_reference_people_the_pipeline_covers():
    frames = walkway_frames(clip_audit.WARM_UP + 1)
    empty = clip_audit.empty_scene(walkway_frames(200))
    people = clip_audit.offline_boxes(frames[-1], empty)
    assert len(people) > 0
    covered, missed = clip_audit.RecallCheck(empty), clip_audit.RecallCheck(empty)
    covered.add(clip_audit.WARM_UP, frames[-1], people)
    missed.add(clip_audit.WARM_UP, frames[-1], np.zeros((0, 4), np.int64))
    missed.add(clip_audit.WARM_UP + 1, frames[-1], np.zeros((0, 4), np.int64))     # not a scored frame
    assert covered.figures()["share"] == 1.0 and covered.figures()["holds"]
    assert missed.figures()["share"] == 0.0 and missed.figures()["frames_scored"] == 1


def test_a_clip_that_cannot_be_read_is_one_clear_error(tmp_path):
    bad = tmp_path / "clip.avi"
    bad.write_bytes(b"not a video")
    with pytest.raises(ValueError, match="clip"):
        clip_audit.read_clip(bad)


def test_a_person_found_in_parts_is_covered_and_one_beside_the_box_is_not():
    pipeline = np.array([[100, 20, 60, 200]])
    parts = np.array([[105, 25, 40, 90], [110, 110, 45, 100]])      # upper and lower body, tiles apart
    beside = np.array([[300, 20, 60, 200]])
    assert clip_audit.covered_people(parts, pipeline) == 2
    assert clip_audit.covered_people(beside, pipeline) == 0
    assert clip_audit.covered_people(parts, np.zeros((0, 4), np.int64)) == 0


def test_the_empty_scene_leaves_out_a_person_who_stands_for_most_of_the_clip():
    from sensorveil.benchmarks.reference_people import empty_scene
    frames = [np.full((120, 160, 3), 200, np.uint8) for _ in range(40)]
    standing = [k for k in range(40) if k % 10 < 7]                # there 70% of the time
    for k in standing:
        frames[k][30:100, 60:90] = 20

    def people(index, frame):
        return [[60, 30, 30, 70]] if index in standing else []
    assert empty_scene(frames)[60, 75] < 50                             # the plain median: the person
    assert abs(empty_scene(frames, people)[60, 75] - 200) < 1          # people left out: the place
    still = empty_scene(frames, people, colour=True)                    # a scene still for --scene-still
    assert still.shape == (120, 160, 3) and np.abs(still - 200).max() < 1


def test_a_count_interval_resamples_runs_of_frames_and_holds_its_mean():
    steady = np.ones(60)
    assert clip_audit.block_interval(steady) == [1.0, 1.0]
    halves = np.r_[np.zeros(30), np.ones(30)]          # long runs: the interval is wide, not a Wilson's
    low, high = clip_audit.block_interval(halves)
    assert low < 0.5 < high and high - low > 0.3
    assert clip_audit.block_interval([1.0, 0.0]) == [0.0, 1.0]
