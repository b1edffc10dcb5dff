"""The count check's second figure: raw people found at their place in the release, one to one. Equal counts
can hide a person missed while someone else is counted; this figure does not."""
import numpy as np

from sensorveil.benchmarks.clip_audit import people_at_their_place

PERSON = [100, 20, 40, 120]


def test_a_release_box_at_the_persons_place_counts_and_one_elsewhere_does_not():
    assert people_at_their_place([PERSON], [[104, 24, 36, 116]]) == 1
    assert people_at_their_place([PERSON], [[300, 20, 40, 120]]) == 0      # same count, someone else
    assert people_at_their_place([PERSON], np.zeros((0, 4))) == 0
    assert people_at_their_place(np.zeros((0, 4)), [PERSON]) == 0


def test_one_release_box_stands_for_one_raw_person_only():
    side_by_side = [[100, 20, 40, 120], [120, 20, 40, 120]]
    assert people_at_their_place(side_by_side, [[110, 20, 40, 120]]) == 1
    assert people_at_their_place(side_by_side, side_by_side) == 2
