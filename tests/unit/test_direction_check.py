"""The direction a conditioned camera release delivers (sensorveil.benchmarks.direction_check): the tracker's first
known direction held for the person, against the way they walk around each frame."""
import numpy as np

from sensorveil.benchmarks.direction_check import DirectionCheck, format_direction
from sensorveil.runtime.stages.held_draws import TURN_CONFIRM


def walk(check, track, frames, speed, directions, start_x=100.0):
    for k, (index, direction) in enumerate(zip(frames, directions)):
        check.add(index, [track], [[start_x + speed * k, 50, 20, 60]], [direction])


def test_the_draw_the_runtime_holds_is_scored_against_the_way_the_person_walks():
    check = DirectionCheck()
    walk(check, 1, range(30), 2.0, [-1, -1, -1] + [1] * 27)         # right, known from the 4th frame
    walk(check, 2, range(30), -2.0, [-1, -1] + [1] + [0] * 27)     # left, first measured right: redrawn at frame 5
    walk(check, 3, range(30), 0.0, [-1] * 30)                       # standing: no walked direction
    figures = check.figures("direction")
    assert figures["boxes"] == 60 and figures["people"] == 2
    # track 2 walks wrong on frames 2-4: its turn to "left" is drawn on once it held for TURN_CONFIRM calls
    assert TURN_CONFIRM == 3 and figures["drawn_on_walked"] == (27 + 25) / 60
    assert figures["drawn_unknown"] == 5 / 60
    # draws an observer sees: track 1 twice (unknown, then right), track 2 three times (unknown, right, its turn),
    # track 3 once (never known)
    assert figures["draws_per_tracked_person"] == 6 / 3 and "2.00 draws per tracked person" in format_direction(figures)
    low, high = figures["interval"]
    assert low <= 52 / 60 <= high
    assert "86.7%" in format_direction(figures) and "of 60 boxes of 2 walking people" in format_direction(figures)


def test_a_release_not_conditioned_on_direction_is_not_scored():
    check = DirectionCheck()
    walk(check, 1, range(30), 2.0, [1] * 30)
    assert "not measured" in format_direction(check.figures(None))
    assert "not measured: no box" in format_direction(DirectionCheck().figures("direction"))


def test_the_walked_direction_reads_frames_either_side():
    check = DirectionCheck(window=3)
    # right for 10 frames, then left: around the turn the slope over +-3 frames changes sign, from past frames only
    # it would change later
    xs = np.concatenate([np.arange(10) * 2.0, 18.0 - np.arange(1, 11) * 2.0])
    for index, x in enumerate(xs):
        check.add(index, [7], [[x, 0, 10, 30]], [1])
    walked = check.labelled()[:, 1]
    assert walked[0] == 1 and walked[-1] == 0
