"""Frames of a clip at the person detector's input size (300x300 RGB, resized as the runtime resizes them):
the int8 calibration frames of the run's clip (clip_frames) and chosen frames to compare graphs on (frames_at)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sensorveil.export.person_detector.common import CALIBRATION_PART, DetectorUnavailable
from sensorveil.runtime.camera.learned import DETECTOR_INPUT


def clip_frames(clip: str | None, count: int) -> np.ndarray:
    """``count`` RGB frames at the detector's input size, evenly from the first part of ``clip``."""
    import cv2
    if not clip or not Path(clip).is_file():
        raise DetectorUnavailable(f"int8 calibration of the person detector reads frames of the run's clip; "
                                  f"{clip!r} is not a file here")
    capture = cv2.VideoCapture(str(clip))
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or count
    wanted = set(np.linspace(0, max(int(total * CALIBRATION_PART) - 1, 0), count).astype(int).tolist())
    frames = read_frames(capture, wanted)
    if not frames:
        raise DetectorUnavailable(f"no frames could be read from {clip} to calibrate the person detector")
    return np.stack(frames)


def frames_at(clip: Path, indices) -> np.ndarray:
    """300x300 RGB frames of ``clip`` at ``indices``, resized as the runtime's detector resizes them."""
    import cv2
    return np.stack(read_frames(cv2.VideoCapture(str(clip)), set(indices)))


def read_frames(capture, wanted: set) -> list:
    """The frames at the ``wanted`` indices of an opened cv2.VideoCapture (released here), RGB at the detector's
    input size; fewer where the clip ends first."""
    import cv2
    frames, index = [], 0
    while len(frames) < len(wanted):
        ok, frame = capture.read()
        if not ok:
            break
        if index in wanted:
            rgb = np.ascontiguousarray(frame[..., ::-1])
            frames.append(cv2.resize(rgb, DETECTOR_INPUT[::-1], interpolation=cv2.INTER_AREA))
        index += 1
    capture.release()
    return frames
