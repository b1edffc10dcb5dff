"""The camera results page says who its test part holds as measured, not "people mostly never seen"."""
from tests.conftest import load_script


def test_the_page_says_when_the_same_people_are_on_both_sides_of_the_split():
    page = load_script("camera_results")
    walkway = {"dataset": {"test_rows": 200, "test_rows_of_training_tracks": 30, "made_from_copies": False}}
    assert page.test_people_text(walkway) == "15% of them of tracks also seen in training"
    crowd = {"dataset": {"test_rows": 200, "test_rows_of_training_tracks": 0, "made_from_copies": True}}
    assert "the same people are on both sides of the split" in page.test_people_text(crowd)
    assert "not recorded" in page.test_people_text({"dataset": {"test_rows": 5}})


def clip_audit(count_same: float) -> dict:
    """A clip audit's figures (clip_audit.audit_clip's keys) whose leak meter and recall hold."""
    leak = {"measured_boxes": 100, "control_caught_boxes": 100, "leaking_boxes": 0, "offline_boxes": 900}
    recall = {"share": 0.92, "interval": [0.89, 0.94], "holds": True, "reference_people": 400, "goal": 0.85,
              "reference": "difference from the empty scene"}
    count = {"pipeline": {"same_count": count_same, "floor_same_count": 0.80, "holds": count_same >= 0.70}}
    return {"leak_meter": leak, "recall": recall, "count": count}


def mechanism(goal: dict, clip: dict) -> dict:
    identity = {"verdict": "no verdict", "why": "too few test people"}
    return {"goal": goal, "clip": clip, "identity": identity, "cost": {"substitutes": "substitutes: walkers"},
            "audit": {"paste": "cut-out", "conditioned_on": "direction"}}


def test_the_goal_column_is_the_camera_goal_so_attributes_alone_never_read_met():
    from sensorveil.benchmarks.camera_goal import camera_goal
    page = load_script("camera_results")
    identity = {"verdict": "protects", "why": "rank-1 within 2x chance"}
    attributes = {"verdict": "protects"}
    failing, holding = clip_audit(0.60), clip_audit(0.78)
    result = {"draw_seed": 0, "dataset": {"made_from_copies": False}, "mechanisms": {
        "pass": mechanism(camera_goal(failing, identity, attributes), failing),
        "other": mechanism(camera_goal(holding, identity, attributes), holding)}}
    rows = [line for line in page.goal_lines(result) if line.startswith("| pass |") or line.startswith("| other |")]
    assert rows[0].startswith("| pass | holds | holds | holds | FAILS | holds | goal not met |")
    assert "pipeline 60.0% (80.0%)" in rows[0]
    assert rows[1].startswith("| other | holds | holds | holds | holds | holds | goal met |")


def test_the_made_crowd_says_its_test_people_are_the_attackers_training_people():
    page = load_script("camera_results")
    assert "people it trained on" in page.identity_people_text({"dataset": {"made_from_copies": True}})
    walkway = page.identity_people_text({"dataset": {"made_from_copies": False}})
    assert "none of them a training track" in walkway and "a track is not a person" in walkway


def test_a_cut_out_release_names_who_its_substitutes_are_from_the_bundle():
    page = load_script("camera_results")
    text = page.how_it_pastes(mechanism({}, {}))
    assert text.endswith("; substitutes: walkers.") and "bank's people of the direction" in text
    window = page.how_it_pastes({"audit": {"paste": "window"}, "cost": {"substitutes": None}})
    assert "goes out as filmed" in window


def test_a_release_drawn_on_the_labelled_direction_gives_no_direction_nag():
    page = load_script("camera_results")
    probe = {"mean": 1.0, "low": 1.0, "high": 1.0}
    raw = {"mean": 0.73, "low": 0.68, "high": 0.78}
    drawn = {"privatized": {"useful": probe, "useful_drawn_on_label": True}, "raw": {"useful": raw},
             "direction_nag": 3.1, "direction_nag_low": 3.1}
    cells = page.direction_cells(drawn)
    assert "read back from the draw" in cells and "310" not in cells and cells.endswith("- (drawn on the label)")
    free = {**drawn, "privatized": {"useful": probe}, "direction_nag": 1.16, "direction_nag_low": 0.74}
    assert page.direction_cells(free).endswith("116.0% (low end 74.0%)")
    result = {"mechanisms": {"pass": {"audit": drawn}, "prgan": {"audit": free}}}
    assert "direction probe of pass measures no utility" in "\n".join(page.drawn_on_direction_lines(result))
