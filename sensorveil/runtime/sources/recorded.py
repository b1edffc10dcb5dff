"""Recorded depth and arrays: a folder of 16-bit PNG depth frames, a .npy array of frames."""
from pathlib import Path

import numpy as np

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.sources.base import MAX_FRAME_PIXELS, BadFrame, Frame, Source, _cv2, check_pixels


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
        self.length, self._count = len(self.files), 0
        self.announced_frames = self.length

    def _load(self, index: int) -> np.ndarray:
        path = self.files[index]
        size = png_size(path)
        if size is not None:   # refused from its header, before a decoder allocates the pixels
            check_pixels(size, path.name)
        image = _cv2().imread(str(path), -1)   # -1 = IMREAD_UNCHANGED: keep 16 bits
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
        with open(str(path), "rb") as handle:
            head = handle.read(24)
    except OSError:
        return None   # the decoder's own error names it
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big")


def _array_modality(frame: np.ndarray) -> str:
    if frame.dtype == np.uint16 and frame.ndim == 2:
        return "depth"
    if frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3:
        return "color"
    return "array"
