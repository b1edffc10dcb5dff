"""The camera results page says who its test part holds as measured, not "people mostly never seen"."""
from tests.conftest import load_script


def test_the_page_says_when_the_same_people_are_on_both_sides_of_the_split():
    page = load_script("camera_results")
    walkway = {"dataset": {"test_rows": 200, "test_rows_of_training_tracks": 30, "made_from_copies": False}}
    assert page.test_people_text(walkway) == "15% of them of tracks also seen in training"
    crowd = {"dataset": {"test_rows": 200, "test_rows_of_training_tracks": 0, "made_from_copies": True}}
    assert "the same people are on both sides of the split" in page.test_people_text(crowd)
    assert "not recorded" in page.test_people_text({"dataset": {"test_rows": 5}})
