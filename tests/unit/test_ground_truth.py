"""sensorveil.benchmarks.ground_truth: a MOTChallenge gt.txt read as the people on each of a clip's frames, and
a file that is not one refused with one error naming it (camera-audit --ground-truth)."""
import numpy as np
import pytest

from sensorveil.benchmarks.ground_truth import true_counts
from sensorveil.runtime.errors import InputError

cv2 = pytest.importorskip("cv2")


@pytest.fixture
def clip(tmp_path):
    """A 6-frame 80x60 clip."""
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (80, 60))
    for _ in range(6):
        writer.write(np.full((60, 80, 3), 100, np.uint8))
    writer.release()
    return path


def test_people_are_counted_on_each_frame_at_the_clips_size(tmp_path, clip):
    gt = tmp_path / "gt.txt"
    # boxes in 160x120 pixels: frame 1 two people, frame 3 one in view and one whose centre walked out (x 170)
    gt.write_text("1,1,10,10,20,40,1,-1,-1,-1\n1,2,100,10,20,40,1,-1,-1,-1\n"
                  "3,1,20,20,20,40,1,-1,-1,-1\n3,3,160,20,20,40,1,-1,-1,-1\n")
    assert true_counts(gt, clip, (160, 120)) == {0: 2, 1: 0, 2: 1, 3: 0, 4: 0, 5: 0}
    # read at the clip's own size (the default), the second person of frame 1 stands outside the 80x60 frame
    assert true_counts(gt, clip)[0] == 1


@pytest.mark.parametrize("text, expected", [
    ("frame,id,left\n", "expected numeric rows frame,id,left,top,width,height"),
    ("1,1,10,10\n", "4 columns in 1 rows; expected rows frame,id,left,top,width,height"),
    ("", "no rows"),
    ("1,1,10,nan,20,40\n", "a value that is not a finite number"),
    ("0,1,10,10,20,40\n", "a frame below 1 or a box without width or height"),
    ("1,1,10,10,0,40\n", "a frame below 1 or a box without width or height"),
    ("50,1,10,10,20,40\n", "its first annotated frame is 50, the clip"),
])
def test_a_file_that_is_not_this_clips_gt_txt_is_one_error_naming_it(tmp_path, clip, text, expected):
    gt = tmp_path / "gt.txt"
    gt.write_text(text)
    with pytest.raises(InputError, match="ground truth .*gt.txt") as caught:
        true_counts(gt, clip)
    assert expected in str(caught.value)


def test_a_missing_file_is_one_error_naming_it(tmp_path, clip):
    with pytest.raises(InputError, match="ground truth .*nope.txt.*expected a MOTChallenge gt.txt"):
        true_counts(tmp_path / "nope.txt", clip)
