"""What every stream source shares: the :class:`Frame` it yields, the :class:`Source` base class,
its errors, the frame-size cap and OpenCV imported on demand.

Failure modes, kept apart because the stream treats them differently:
* ``read()`` returns ``None``: a finite source (file, folder, recording) has ended.
* :class:`BadFrame` (an InputError): this one frame is unusable; the stream counts it and goes on.
* :class:`SourceDisconnected`: a live device stopped delivering; :class:`Reconnecting` closes
  it and reopens it with exponential back-off, and gives up with one clear error.
* BackendUnavailableError: the library or hardware a source needs is not on this machine.
"""
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError, SensorveilError

DEPTH_MAX_MM = 4500        # Kinect v2's and Azure Kinect NFOV's working range ends here
# Frames above this many pixels are refused (a bad frame), before decoding where the format allows:
# a small 12000x12000 16-bit PNG decodes to 288 MB, and a sensor stream has no business sending it.
# 16.7 MP covers 4K cameras (8.3 MP) and every depth sensor with room to spare.
MAX_FRAME_PIXELS = 4096 * 4096


@dataclass(frozen=True)
class Frame:
    data: np.ndarray      # sensor units: uint16 mm for depth, uint8 BGR for colour
    timestamp: float      # seconds
    index: int            # frame number (sensor's or file's where known)
    modality: str         # "depth", "color", "gray" or "array" (already in a bundle's units)


class SourceDisconnected(SensorveilError):
    """A live source stopped delivering frames (unplugged, network drop, device reset)."""


class BadFrame(InputError):
    """One frame could not be read or decoded; the stream counts it and reads the next."""


class Source:
    """Base class: ``open()``, ``read() -> Frame | None``, ``close()``; also a context manager
    and an iterator of frames. Subclasses set ``live`` (reopen on disconnect) and ``fps``."""

    live = False
    fps: "float | None" = None
    announced_frames: "int | None" = None   # how many frames a recorded source says it holds

    def __init__(self, uri: str):
        self.uri = uri
        self._count = 0

    def open(self) -> None:
        raise NotImplementedError

    def read(self) -> "Frame | None":
        raise NotImplementedError

    def close(self) -> None:
        pass

    def read_direct(self) -> "Frame | None":
        """``read()`` in the caller's thread, for a caller that runs its own reader thread; only
        :class:`Prefetching` differs (it skips its own thread)."""
        return self.read()

    def _next_index(self) -> int:
        self._count += 1
        return self._count - 1

    def __enter__(self) -> "Source":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[Frame]:
        frame = self.read()
        while frame is not None:
            yield frame
            frame = self.read()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"


def _cv2():
    try:
        import cv2
    except ImportError:
        raise BackendUnavailableError(
            "this source needs OpenCV: pip install opencv-python-headless "
            "(or pip install 'sensorveil[camera]')") from None
    return cv2


def check_pixels(shape, what: str) -> None:
    """A BadFrame for a frame of more than MAX_FRAME_PIXELS pixels (height x width of ``shape``)."""
    height, width = int(shape[0]), int(shape[1])
    if height * width > MAX_FRAME_PIXELS:
        raise BadFrame(f"{what}: a {width}x{height} frame exceeds the cap of {MAX_FRAME_PIXELS:,} pixels; "
                       "refused (expected sensor-sized frames)")


FRAME_CHANNELS = (1, 3, 4)     # grey, BGR, BGRA: what a camera, a depth sensor or a recording delivers


def check_frame(data) -> None:
    """One InputError for a frame no pre-processor can take: not an array, no numbers (bool, object), not one
    image (2 or 3 axes), an odd channel count, or no pixels."""
    if not isinstance(data, np.ndarray):
        raise InputError("frame of type {}; expected a numpy array".format(type(data).__name__))
    if data.dtype.kind not in "uif":
        raise InputError("frame of dtype {}; expected integer or floating-point pixels".format(data.dtype))
    if data.ndim not in (2, 3) or (data.ndim == 3 and data.shape[2] not in FRAME_CHANNELS):
        raise InputError("frame of shape {}; expected HxW or HxWxC with C in {}".format(data.shape, FRAME_CHANNELS))
    if data.size == 0:
        raise InputError("frame of shape {} holds no pixels".format(data.shape))
