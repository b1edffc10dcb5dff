"""scripts/whole_frame_window.py: the whole frame as one window of the person graph, its boxes in frame pixels,
and the people each window covers."""
import numpy as np

from tests.conftest import load_script


def test_the_whole_frame_is_resized_into_the_graphs_input_once_and_read_back_in_frame_pixels():
    script = load_script("whole_frame_window")
    seen = []

    def graph(_name, batch):        # one person a quarter of the input from the top, at half its width
        seen.append(batch.shape)
        return np.asarray([[[0.25, 0.5, 0.75, 0.6, 0.9, 1]]], np.float32)

    rows = script.whole_frame_rows(np.zeros((360, 480, 3), np.uint8), graph)
    assert seen == [(1, 300, 300, 3)] and len(rows) == 1
    from sensorveil.export.person_detector.camera_fit import merged_boxes
    assert merged_boxes(rows, 0.3, 360).tolist() == [[240, 90, 48, 180]]   # x 0.5 of 480, y 0.25 of 360


def test_a_person_counts_as_covered_at_the_audits_overlap_or_half_inside_a_box():
    script = load_script("whole_frame_window")
    people = np.asarray([[10, 10, 10, 40], [100, 10, 10, 40], [200, 10, 10, 40]])
    boxes = np.asarray([[10, 12, 10, 40], [95, 0, 30, 90]])             # the first overlapping, the second around
    assert script.hits(people, boxes).tolist() == [True, True, False]
    assert script.hits(people, np.zeros((0, 4))).tolist() == [False] * 3
