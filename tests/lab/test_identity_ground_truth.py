"""scripts/identity_ground_truth.py: crops mapped to the ground truth's people, and the audit's split by tracks
counted in people (a test track that follows a training person is counted as one)."""
import numpy as np

from tests.conftest import load_script


def test_a_crop_is_the_person_whose_box_centre_is_nearest_and_clear_of_the_next():
    script = load_script("identity_ground_truth")
    people = {0: (np.array([7, 8]), np.array([100.0, 200.0]), np.array([50.0, 50.0]), np.array([20.0, 20.0])),
              1: (np.array([7, 8]), np.array([100.0, 101.0]), np.array([50.0, 50.0]), np.array([20.0, 20.0]))}
    timeline = np.array([[0, 103.0], [0, 198.0], [0, 150.0], [1, 100.5], [5, 100.0], [-1, np.nan]])
    assert script.crop_people(timeline, people).tolist() == [7, 8, -1, -1, -1, -1]


def test_the_split_by_tracks_is_counted_in_people():
    script = load_script("identity_ground_truth")
    track = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    split = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    person = np.array([5, 5, 6, 6, 5, 5, 9, 9])      # track 2 is person 5 again, under a new track
    table = script.track_table(track, split, person)
    assert (table["training_tracks"], table["training_people"]) == (2, 2)
    assert (table["test_tracks"], table["test_people"]) == (2, 2)
    assert table["test_tracks_of_training_people"] == 1 and table["test_people_also_in_training"] == 1
