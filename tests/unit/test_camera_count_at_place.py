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


def test_the_independent_counter_runs_the_learned_graph_as_the_bundle_fitted_it():
    """Decision 0026: the goal's independent counter is the bundle's learned graph alone at the threshold, tiles
    and height cap fitted to the camera; the first setting (0.3, square tiles, no cap) is counted beside the goal."""
    from types import SimpleNamespace

    from sensorveil.benchmarks.clip_audit import BESIDE_THE_GOAL, counter_factories
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
    from sensorveil.runtime.camera.settings import CameraSettings

    def run_graph(graph, batch):       # never run here: the counters are only built
        raise AssertionError("no graph runs while the counters are built")

    fitted = CameraSettings(detector="ssdlite+motion", detector_graph=DETECTOR_GRAPH, detector_score=0.05,
                            detector_tile_rows=2, detector_tallest=0.4)
    privatizer = SimpleNamespace(pipeline=SimpleNamespace(graphs={DETECTOR_GRAPH: None}, declared=fitted,
                                                          run_graph=run_graph))
    factories = counter_factories(privatizer)
    independent = factories["independent"][1]().__self__
    assert (independent.score, independent.tile_rows, independent.tallest) == (0.05, 2, 0.4)
    first = factories["first_setting"][1]().__self__
    assert (first.score, first.tile_rows, first.tallest) == (0.3, 1, 1.0)
    assert "first_setting" in BESIDE_THE_GOAL and "independent" not in BESIDE_THE_GOAL
