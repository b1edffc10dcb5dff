"""People in camera frames, for the camera mechanism: find them, follow them, cut them out, paste back.

The camera pipeline a bundle declares (manifest ``camera``) is: the detector below finds the people
in the full frame, each person's box is cut out as a fixed-size grey crop (the bundle's input
sample), the bundle privatizes the crops as a batch, and each privatized crop is pasted back into
its box. Everything outside the boxes is the raw frame ("window" paste), or the empty scene ("cut-out").

One job per module: ``detect`` (the people detector), ``track`` (the tracker and walking directions),
``composite`` (crops cut out and pasted back), ``settings`` (the manifest's camera entry, parsed and
checked once, with its defaults), ``pipeline`` (``PersonCrops``, the bundle's pre-processor).

numpy plus OpenCV, imported when a detector is built, with one error naming the extra. Runs on the
boards' own Python (3.6): no annotations import, no walrus.
"""
from sensorveil.runtime.camera.composite import (
    CROP_MARGIN,
    CROP_SHAPE,
    PERSON_CONTRAST,
    PERSON_GAP,
    PERSON_SHAPE,
    SHADOW_RATIO,
    clean_cut_out,
    coarse,
    crop_people,
    crop_windows,
    cut,
    keep_apart,
    paste_people,
    paste_window,
    person_bounds,
    person_shaped,
    place_person,
    stand_out,
)
from sensorveil.runtime.camera.detect import (
    BGR_TO_GRAY,
    PROTECT_MARGIN,
    MotionPeopleDetector,
    channels_like,
    opencv,
    to_gray,
)
from sensorveil.runtime.camera.pipeline import (
    MAX_PROTECT,
    WALKED_IN,
    WARMUP_BLOCK,
    CropContext,
    PersonCrops,
    person_crops_from_manifest,
)
from sensorveil.runtime.camera.settings import PASTE_CUT_OUT, PASTE_MODES, PASTE_WINDOW, CameraSettings
from sensorveil.runtime.camera.track import Tracker, WalkingDirection, iou

__all__ = [
    # detect
    "MotionPeopleDetector", "opencv", "to_gray", "channels_like", "PROTECT_MARGIN", "BGR_TO_GRAY",
    # track
    "iou", "Tracker", "WalkingDirection",
    # composite
    "crop_windows", "cut", "crop_people", "person_bounds", "clean_cut_out", "stand_out", "coarse", "paste_window",
    "paste_people", "place_person", "keep_apart", "CROP_SHAPE", "CROP_MARGIN", "PERSON_CONTRAST", "SHADOW_RATIO",
    "PERSON_GAP", "person_shaped", "PERSON_SHAPE",
    # pipeline
    "PersonCrops", "CropContext", "person_crops_from_manifest", "PASTE_MODES", "WARMUP_BLOCK", "WALKED_IN",
    "MAX_PROTECT",
    # settings
    "CameraSettings", "PASTE_WINDOW", "PASTE_CUT_OUT",
]
