"""A stream survives one odd frame of any dtype or shape: it counts it bad and goes on, on a digits bundle (the
demonstration path) and on a camera pipeline (MOG2 behind it)."""
import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.sources import Frame, Source
from sensorveil.runtime.stream import run_stream


def scripted(frames, modality="camera"):
    class Scripted(Source):
        def open(self):
            self.items = list(frames)

        def read(self):
            if self._count >= len(self.items):
                return None
            index = self._next_index()
            return Frame(self.items[index], index / 25.0, index, modality)
    source = Scripted("scripted")
    source.open()
    return source


ODD = [np.zeros((8, 8), np.float32) + 3.0,        # float32 among uint8
       np.zeros((9, 9), np.uint8),                 # another size
       np.zeros((8, 8), bool),                     # bool
       np.full((8, 8), None, object),              # object
       np.zeros((10, 0, 3), np.uint8),             # no pixels at all
       np.zeros((8, 8, 5), np.uint8),              # five channels
       np.zeros((2, 8, 8, 3), np.uint8)]           # a batch of frames, not a frame


@pytest.mark.parametrize("odd", range(len(ODD)))
@pytest.mark.exports
@pytest.mark.trains
def test_one_odd_frame_among_good_ones_is_counted_bad_and_the_stream_goes_on(digits_bundle, odd):
    good = [np.random.default_rng(k).integers(0, 256, (8, 8, 3), dtype=np.uint8) for k in range(4)]
    report = run_stream(Privatizer.load(digits_bundle), scripted(good[:2] + [ODD[odd]] + good[2:]))
    assert report["frames_in"] == 5 and report["frames_out"] + report["bad"] == 5
    assert report["frames_out"] >= 4 - (odd == 1)          # the other size may be a frame the path can take


def test_the_camera_pipeline_refuses_an_empty_or_a_bool_frame_with_one_input_error():
    from sensorveil.runtime.camera import PersonCrops
    frames = [np.full((60, 80, 3), 90, np.uint8), np.zeros((10, 0, 3), np.uint8), np.zeros((60, 80), bool),
              np.full((60, 80, 3), 90, np.uint8)]
    crops = PersonCrops(paste="cut-out")
    for frame in frames:        # the pipeline alone: one clear InputError, never OpenCV's error
        if frame.size == 0 or frame.dtype == bool:
            with pytest.raises(Exception) as caught:
                crops.prepare(frame)
            assert type(caught.value).__name__ == "InputError"
        else:
            crops.prepare(frame)
