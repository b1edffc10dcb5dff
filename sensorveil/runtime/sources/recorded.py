"""Recorded depth and arrays: a folder of 16-bit PNG depth frames, a .npy array of frames."""
import os
import stat
from pathlib import Path

import numpy as np

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.regular import OPEN_FLAGS, kind_of, read_regular
from sensorveil.runtime.sources.base import MAX_FRAME_PIXELS, BadFrame, Frame, Source, _cv2, check_pixels

# a 16-bit PNG frame is at most its raw pixels plus PNG's overhead; a larger file is no depth frame
MAX_PNG_BYTES = MAX_FRAME_PIXELS * 2 + (1 << 20)


# -- recorded depth and arrays -----------------------------------------------------------
class RecordedSource(Source):
    """Frames stored at ``path``, numbered in storage order, timed at a nominal ``fps``."""

    def __init__(self, uri: str, path: Path, fps: float = 30.0):
        super().__init__(uri)
        self.path, self.fps = path, fps
        self.length = 0

    def read(self) -> "Frame | None":
        if self._count >= self.length:
            return None
        index = self._next_index()
        return Frame(self._load(index), index / self.fps, index, self.modality)

    def _load(self, index: int) -> np.ndarray:
        raise NotImplementedError


class DepthDirSource(RecordedSource):
    """A folder of 16-bit PNG depth frames in millimetres, read in file-name order."""

    modality = "depth"

    def open(self) -> None:
        if not self.path.is_dir():
            raise InputError(f"{self.uri}: {self.path} is not a folder; expected a folder of 16-bit PNG depth frames")
        self.files = sorted(self.path.glob("*.png"))
        if not self.files:
            raise InputError(f"{self.uri}: no .png files in {self.path}; expected 16-bit PNG depth frames (mm)")
        for path in self.files:   # a FIFO among them would hold the stream until someone writes to it
            try:
                mode = os.stat(str(path)).st_mode
            except OSError as error:
                raise InputError(f"{self.uri}: {path} cannot be read ({error.strerror or error}); expected "
                                 "16-bit PNG depth frames (mm), each a regular file") from None
            if not stat.S_ISREG(mode):
                raise InputError(f"{self.uri}: {path} is {kind_of(mode)}; expected 16-bit PNG depth frames (mm), "
                                 "each a regular file")
        self.length, self._count = len(self.files), 0
        self.announced_frames = self.length

    def _load(self, index: int) -> np.ndarray:
        path = self.files[index]
        # read here (O_NONBLOCK, checked on what was opened): a file swapped for a FIFO after open() is a bad
        # frame, never a wait; the decoder gets the bytes that were checked
        data = read_regular(path, MAX_PNG_BYTES, "a 16-bit PNG depth frame, a regular file", BadFrame)
        size = png_header_size(data[:24])
        if size is not None:   # refused from its header, before a decoder allocates the pixels
            check_pixels(size, path.name)
        cv2 = _cv2()
        image = cv2.imdecode(np.frombuffer(data, np.uint8), -1) if data else None   # -1: keep 16 bits
        if image is None or image.ndim != 2 or image.dtype != np.uint16:
            found = "unreadable" if image is None else f"{image.dtype} {image.shape}"
            raise BadFrame(f"{path.name}: {found}; expected a single-channel 16-bit PNG (depth in mm)")
        return image


class NpySource(RecordedSource):
    """Frames stacked along axis 0 of a .npy file (one frame if it has a frame's rank)."""

    def open(self) -> None:
        if not self.path.is_file():
            raise InputError(f"{self.uri}: file not found; expected a .npy array of frames (N, ...)")
        try:
            # mmap: a long recording is not read into memory; no pickle, ever.
            self.frames = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except ValueError as error:
            raise InputError(f"{self.uri}: not a plain numeric .npy ({error})") from None
        if self.frames.ndim == 2:     # a single depth or grey frame
            self.frames = self.frames[None]
        if self.frames.ndim < 2 or len(self.frames) == 0 or self.frames[0].size == 0:
            raise InputError(f"{self.uri}: the array of shape {self.frames.shape} holds no frames; expected "
                             "(N, ...) frames with N >= 1, or one 2-D frame")
        if self.frames[0].size > MAX_FRAME_PIXELS * 4:   # 4: a colour frame's channels and then some
            raise InputError(f"{self.uri}: frames of shape {self.frames.shape[1:]} exceed the cap of "
                             f"{MAX_FRAME_PIXELS:,} pixels; expected a sensor stream (sources.MAX_FRAME_PIXELS)")
        self.modality = _array_modality(self.frames[0])
        self.length, self._count = len(self.frames), 0
        self.announced_frames = self.length

    def _load(self, index: int) -> np.ndarray:
        return np.asarray(self.frames[index])


def png_size(path: Path) -> "tuple[int, int] | None":
    """(height, width) from a PNG's IHDR chunk, without decoding; None if it is not a PNG."""
    try:
        descriptor = os.open(str(path), OPEN_FLAGS)   # O_NONBLOCK: a FIFO opens at once, and is then no PNG
    except OSError:
        return None   # the decoder's own error names it
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        head = handle.read(24)
    return png_header_size(head)


def png_header_size(head: bytes) -> "tuple[int, int] | None":
    """(height, width) from a PNG's first 24 bytes; None if they are not a PNG's."""
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big")


def _array_modality(frame: np.ndarray) -> str:
    if frame.dtype == np.uint16 and frame.ndim == 2:
        return "depth"
    if frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3:
        return "color"
    return "array"
