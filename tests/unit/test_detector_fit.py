"""The person detector's tiles (runtime.camera.learned.detector_tiles) and the export's choice of threshold and
tiles per camera (export.person_detector.camera_fit.choose), on boxes and figures made here."""
import numpy as np
import pytest

from sensorveil.export.person_detector import camera_fit
from sensorveil.runtime.camera import learned
from sensorveil.runtime.errors import InputError


@pytest.mark.parametrize("height, width", [(480, 640), (360, 640), (360, 480), (640, 360), (300, 300)])
def test_two_tile_rows_cover_the_frame_with_smaller_overlapping_squares(height, width):
    tiles = learned.detector_tiles(height, width, 2)
    assert tiles[:len(learned.square_tiles(height, width))] == learned.square_tiles(height, width)
    small = tiles[len(learned.square_tiles(height, width)):]
    sides = {side for _, _, side in small}
    assert len(sides) == 1 and sides.pop() < min(height, width)
    covered = np.zeros((height, width), bool)
    for top, left, side in small:
        assert top >= 0 and left >= 0 and top + side <= height and left + side <= width
        covered[top:top + side, left:left + side] = True
    assert covered.all()
    rows = sorted({top for top, _, _ in small}) if height <= width else sorted({left for _, left, _ in small})
    assert len(rows) == 2                                   # two rows across the short side


def test_one_tile_row_is_the_square_tiles_and_other_rows_are_refused():
    assert learned.detector_tiles(360, 640, 1) == learned.square_tiles(360, 640)
    for rows in (0, 3, 1.5, True, "2"):
        with pytest.raises(InputError, match="tile rows"):
            learned.detector_tiles(360, 640, rows)


def test_a_small_person_the_square_tiles_shrink_away_is_seen_on_a_smaller_tile():
    """A graph that finds a person only when they are at least 40 of its 300 pixels tall: a 60 px person in a
    480 px frame is 37 px on the square tile and 66 px on a two-row tile."""
    frame = np.zeros((480, 640, 3), np.uint8)
    person = (300, 200, 20, 60)                             # x, y, w, h

    def graph(_name, batch):
        return np.zeros((1, 0, 6), np.float32)

    seen = []

    def seeing(_name, batch):
        seen.append(batch.shape)
        return graph(_name, batch)

    for rows, tall_enough in ((1, False), (2, True)):
        found = []
        for top, left, side in learned.detector_tiles(480, 640, rows):
            inside = left <= person[0] and person[0] + person[2] <= left + side and top <= person[1] \
                and person[1] + person[3] <= top + side
            found.append(inside and person[3] * 300 / side >= 40)
        assert any(found) == tall_enough
    detector = learned.LearnedPeopleDetector(seeing, tile_rows=2)
    detector.find(frame)
    assert len(seen) == len(learned.detector_tiles(480, 640, 2)) == 8


def candidate(rows, score, covered, people=100, extra=0):
    made = camera_fit.Candidate(rows, score)
    made.covered, made.people, made.extra = covered, people, extra
    made.runs = 2 if rows == 1 else 8
    return made


def test_the_fit_keeps_the_cheapest_then_highest_threshold_that_meets_the_target():
    candidates = [candidate(1, 0.3, 70), candidate(1, 0.1, 91, extra=40),     # too many boxes on no one
                  candidate(2, 0.3, 89), candidate(2, 0.25, 91, extra=3), candidate(2, 0.2, 95, extra=5)]
    chosen, reached = camera_fit.choose(candidates)
    assert reached and (chosen.rows, chosen.score) == (2, 0.25)
    candidates.append(candidate(1, 0.2, 90, extra=10))
    chosen, reached = camera_fit.choose(candidates)
    assert reached and (chosen.rows, chosen.score) == (1, 0.2)          # two graph runs a frame beat eight


def test_where_nothing_meets_the_target_the_fit_keeps_the_one_finding_the_most_people():
    candidates = [candidate(1, 0.3, 20), candidate(1, 0.05, 70, extra=40), candidate(2, 0.05, 86, extra=60),
                  candidate(2, 0.1, 70, extra=20)]
    chosen, reached = camera_fit.choose(candidates)
    assert not reached and (chosen.rows, chosen.score) == (2, 0.05)


def test_without_the_clip_the_first_setting_is_kept_and_the_record_says_why(tmp_path):
    said = []
    fields = camera_fit.fit_camera(str(tmp_path / "gone.avi"), tmp_path / "detector.onnx", said.append)
    assert fields["detector_score"] == learned.DEFAULT_SCORE and fields["detector_tile_rows"] == 1
    assert fields["detector_fit"]["chosen"] == "first setting" and "gone.avi" in fields["detector_fit"]["why"]
    assert said and "not here" in said[0]


def test_a_box_most_of_a_smaller_tiles_height_is_dropped_but_kept_on_a_square_tile():
    """A graph that answers every tile with one box 90% of its height: the square tiles' boxes stand, the smaller
    tiles' are no person's (learned.SMALL_TILE_TALLEST) and go."""
    def tall_box(_name, batch):
        return np.asarray([[[0.05, 0.4, 0.95, 0.6, 0.9, learned.COCO_PERSON]]], np.float32)

    detector = learned.LearnedPeopleDetector(tall_box, tile_rows=2)
    found = detector.find(np.zeros((480, 640, 3), np.uint8))
    assert len(found) >= 1 and (found[:, 3] > 0.8 * 480).all()          # the square tiles' people only
    short = learned.on_small_tile(np.asarray([[0, 0, 10, 100], [0, 0, 10, 200]]), 274)
    assert short.tolist() == [[0, 0, 10, 100]]


def test_a_tall_box_found_below_the_first_threshold_counts_only_where_the_graph_is_as_sure_as_it_asked():
    """camera.detector_tallest: a box several people tall at a fitted low threshold is dropped unless the graph also
    finds it at DEFAULT_SCORE; short boxes stand."""
    rows = np.asarray([[[0.1, 0.1, 0.9, 0.3, 0.1, learned.COCO_PERSON],       # tall, weak: a group's box
                        [0.1, 0.5, 0.9, 0.7, 0.6, learned.COCO_PERSON],       # tall, sure: someone near the camera
                        [0.1, 0.8, 0.3, 0.85, 0.1, learned.COCO_PERSON]]], np.float32)     # short, weak: far away

    def graph(_name, batch):
        return rows
    frame = np.zeros((100, 100, 3), np.uint8)
    weak_and_capped = learned.LearnedPeopleDetector(graph, score=0.05, tallest=0.5).find(frame)
    assert sorted(weak_and_capped[:, 0].tolist()) == [50, 80]                  # the weak tall box (x 10) went
    uncapped = learned.LearnedPeopleDetector(graph, score=0.05).find(frame)
    assert sorted(uncapped[:, 0].tolist()) == [10, 50, 80]
    at_first = learned.LearnedPeopleDetector(graph, score=0.3, tallest=0.5).find(frame)
    assert at_first[:, 0].tolist() == [50]                                     # no cap at the first threshold


def test_the_cap_is_one_and_a_half_times_the_tall_reference_people_in_the_allowed_range():
    people = [np.asarray([[0, 0, 10, h]]) for h in range(40, 141)]           # heights 40..140 in a 400 px frame
    share = camera_fit.tallest_share(people, 400)
    assert share == round(1.5 * np.percentile(np.arange(40, 141), 95) / 400, 3)
    assert camera_fit.tallest_share([np.zeros((0, 4))], 400) == learned.DEFAULT_TALLEST     # nobody: no cap
    assert camera_fit.tallest_share([np.asarray([[0, 0, 5, 390]])], 400) == 1.0
