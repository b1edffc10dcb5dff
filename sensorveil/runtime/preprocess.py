"""From a sensor frame to a bundle's input sample and back, in numpy only.

A bundle is trained on samples of one shape (PR-GAN: 180x180 depth patches, 8x8 digits); a
sensor delivers whole frames. A pre-processor turns each frame into one sample in the bundle's
*sensor units* (the Privatizer then validates and normalizes it), and ``restore`` turns the
privatized sample into what leaves the device.

* :class:`Passthrough`: the frame already has the bundle's sample shape (npy recordings of samples).
* :class:`DepthPersonPatch`: PR-GAN section 6.1 ("from each [512x424] frame, we retrieve a
  180x180 patch centered around the participant"). The participant is found as the nearest
  blob above the floor. ``restore`` emits the privatized patch (default) or pastes it into an
  otherwise *invalid* (0 mm) frame: raw pixels outside the patch never leave the device.
* :class:`FitToBundle`: camera frames (and any frame larger or smaller than the sample):
  grayscale, centre crop to the sample's aspect, area resampling to the sample's size, and a
  linear map of the source range (0-255 for 8-bit images) onto the bundle's sensor range.
  For camera frames and the depth or digits bundles this is a DEMONSTRATION path: it shows the
  runtime's throughput and what the mechanism does to an image; a bundle only protects the
  attributes of the kind of data it was trained on.
"""
import math
from functools import lru_cache

import numpy as np

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.preprocessor import Preprocessor
from sensorveil.runtime.sources import DEPTH_MAX_MM, Frame
from sensorveil.runtime.spec import TensorSpec

BGR_TO_GRAY = np.array([0.114, 0.587, 0.299], dtype=np.float32)   # ITU-R BT.601 luma, BGR order


class Passthrough(Preprocessor):
    """Frames that already are bundle samples."""

    name = "passthrough"

    def prepare(self, frame: Frame) -> "tuple[np.ndarray, None]":
        return frame.data, None

    def restore(self, privatized: np.ndarray, context) -> np.ndarray:
        return privatized


# -- depth: PR-GAN section 6.1 ------------------------------------------------------------
FLOOR_EVERY = 30   # frames between two estimates of the floor's depth (DepthPersonPatch)


class DepthPersonPatch(Preprocessor):
    """A ``size`` patch around the person in an overhead depth frame (PR-GAN section 6.1).

    The person is the nearest blob above the floor: the floor is the median valid depth (a
    person covers a minority of an overhead frame), pixels ``min_height_mm`` nearer than it
    stand above it, the nearest of those seeds the blob, and the patch is centred on the
    centroid of the above-floor pixels within half a patch of the seed. Frames without anyone
    keep the last centre (the frame centre at first). All searches run on a ``stride``-subsampled
    grid: the patch needs a centre to a few pixels, not a segmentation.
    """

    name = "depth-person-patch"

    def __init__(self, size: "tuple[int, int]", output: str = "patch", min_height_mm: float = 300.0,
                 stride: int = 4):
        if output not in ("patch", "frame"):
            raise InputError(f"depth output {output!r} is not known; expected 'patch' or 'frame'")
        self.size, self.output = tuple(size), output
        self.min_height_mm, self.stride = float(min_height_mm), int(stride)
        self.center: "tuple[int, int] | None" = None
        self.floor, self.frames_since_floor = None, 0

    def prepare(self, frame: Frame) -> "tuple[np.ndarray, tuple]":
        depth = frame.data
        if depth.ndim != 2 or depth.shape[0] < self.size[0] or depth.shape[1] < self.size[1]:
            raise InputError(f"depth frame of shape {depth.shape}; expected a 2-D frame of at least "
                             f"{self.size[0]}x{self.size[1]} (e.g. Kinect v2's 424x512)")
        if self.floor is None or self.frames_since_floor >= FLOOR_EVERY:
            # the sensor is fixed above the floor: its depth changes only when the sensor is moved, so
            # the median (the costliest step) runs once a second at 30 FPS, not on every frame
            self.floor, self.frames_since_floor = floor_depth(depth, self.stride), 0
        self.frames_since_floor += 1
        found = find_person(depth, self.min_height_mm, self.stride, self.size, self.floor)
        if found is not None:
            self.center = found
        elif self.center is None:
            self.center = (depth.shape[0] // 2, depth.shape[1] // 2)
        top, left = crop_origin(self.center, self.size, depth.shape)
        patch = depth[top:top + self.size[0], left:left + self.size[1]]
        return patch, (top, left, depth.shape)

    def restore(self, privatized: np.ndarray, context) -> np.ndarray:
        if self.output == "patch":
            return privatized
        top, left, shape = context
        frame = np.zeros(shape, dtype=privatized.dtype)   # 0 mm = "no reading" on depth sensors
        frame[top:top + privatized.shape[0], left:left + privatized.shape[1]] = privatized
        return frame


def floor_depth(depth: np.ndarray, stride: int):
    """The floor's distance: the median valid depth on the coarse grid (a person covers a minority of
    an overhead frame), or None when no pixel is valid."""
    coarse = depth[::stride, ::stride]
    valid = coarse[coarse > 0]
    return float(np.median(valid)) if valid.size else None


def find_person(depth: np.ndarray, min_height_mm: float, stride: int, patch: "tuple[int, int]", floor=None):
    """(row, col) of the nearest blob standing ``min_height_mm`` above the floor, or None. ``floor``:
    the floor's depth when the caller knows it (DepthPersonPatch keeps it between frames)."""
    floor = floor_depth(depth, stride) if floor is None else floor
    if floor is None:
        return None
    coarse = depth[::stride, ::stride]
    cv2 = _opencv()
    threshold = floor - min_height_mm
    if cv2 is not None and coarse.dtype in (np.uint8, np.uint16) and threshold >= 1:
        return _find_with_opencv(cv2, coarse, int(np.ceil(threshold)) - 1, stride, patch)
    rows, cols = np.nonzero(_above_floor(coarse, threshold))
    if rows.size == 0:
        return None
    heights = coarse[rows, cols]
    nearest = int(np.argmin(heights))     # the nearest pixel (the head, seen from above) seeds the blob
    half_r, half_c = patch[0] / (2 * stride), patch[1] / (2 * stride)
    blob = (np.abs(rows - rows[nearest]) <= half_r) & (np.abs(cols - cols[nearest]) <= half_c)
    return int(rows[blob].mean() * stride), int(cols[blob].mean() * stride)


def _find_with_opencv(cv2, coarse: np.ndarray, nearest_allowed: int, stride: int, patch: "tuple[int, int]"):
    """find_person's steps as four OpenCV calls (far fewer per-frame microseconds than numpy's masks and
    index arrays on a 2-core board): the mask of valid pixels in [1, nearest_allowed], the
    nearest of them (minMaxLoc scans in row order, as argmin does), and the centroid of the mask
    within half a patch of it (binary moments: the mean of those pixels' positions)."""
    coarse = np.ascontiguousarray(coarse)
    mask = cv2.inRange(coarse, 1, nearest_allowed)
    if cv2.countNonZero(mask) == 0:
        return None
    col, row = cv2.minMaxLoc(coarse, mask)[2]
    half_r, half_c = patch[0] / (2 * stride), patch[1] / (2 * stride)
    top, left = max(math.ceil(row - half_r), 0), max(math.ceil(col - half_c), 0)
    window = mask[top:math.floor(row + half_r) + 1, left:math.floor(col + half_c) + 1]
    moments = cv2.moments(window, binaryImage=True)
    return (int((moments["m01"] / moments["m00"] + top) * stride),
            int((moments["m10"] / moments["m00"] + left) * stride))


def _above_floor(coarse: np.ndarray, threshold: float) -> np.ndarray:
    """Valid (non-zero) pixels nearer than ``threshold``. On unsigned depth one comparison does both:
    0 - 1 wraps to the dtype's maximum, so invalid pixels fail ``coarse - 1 < threshold - 1``."""
    if coarse.dtype.kind == "u" and 1 <= threshold <= np.iinfo(coarse.dtype).max:
        return (coarse - coarse.dtype.type(1)) < coarse.dtype.type(int(np.ceil(threshold)) - 1)
    return (coarse > 0) & (coarse < threshold)


def crop_origin(center: "tuple[int, int]", size: "tuple[int, int]", shape: "tuple[int, int]") -> "tuple[int, int]":
    """Top-left corner of a ``size`` crop centred on ``center``, moved inside the frame."""
    top = min(max(center[0] - size[0] // 2, 0), shape[0] - size[0])
    left = min(max(center[1] - size[1] // 2, 0), shape[1] - size[1])
    return int(top), int(left)


# -- camera and other frames: resize / crop / normalize ---------------------------------------
class FitToBundle(Preprocessor):
    """Grayscale, centre crop, area resampling and a range map onto a 2-D bundle input."""

    name = "fit-to-bundle"

    def __init__(self, spec: TensorSpec, source_range: "tuple[float, float]"):
        if len(spec.sample_shape) != 2:
            raise InputError(f"this bundle takes samples of shape {spec.sample_shape}; image frames can "
                             "only feed a bundle whose input is a 2-D image (H, W)")
        self.spec = spec
        low, high = source_range
        # (v - low) * gain + spec.low maps the source range onto the bundle's sensor range
        self.source_low, self.gain = float(low), (spec.high - spec.low) / float(high - low)
        # an 8-bit grey level has 256 values: the range map once, as a table (OpenCV's LUT applies it)
        self.levels = self._to_sensor_range(np.arange(256, dtype=np.float32))
        self.levels_are_identity = self.levels.dtype == np.uint8 and np.array_equal(self.levels, np.arange(256))

    def prepare(self, frame: Frame) -> "tuple[np.ndarray, None]":
        image = frame.data
        if image.ndim not in (2, 3) or image.size == 0:
            raise InputError(f"frame of shape {image.shape}; expected an HxW or HxWx3 image")
        height, width = self.spec.sample_shape
        crop = image[_centre_slices(image.shape[:2], height / width)]
        cv2 = _opencv()
        if cv2 is not None and crop.dtype == np.uint8 and crop.shape[0] >= height and crop.shape[1] >= width:
            # OpenCV's INTER_AREA is area resampling only when shrinking (it turns bilinear when
            # enlarging), so small frames keep the numpy resampler
            grey = _fit_with_opencv(cv2, crop, height, width)
            return (grey if self.levels_are_identity else cv2.LUT(grey, self.levels)), None
        return self._to_sensor_range(_fit_with_numpy(crop, height, width)), None

    def _to_sensor_range(self, values: np.ndarray) -> np.ndarray:
        values = (values - self.source_low) * self.gain + self.spec.low
        np.clip(values, self.spec.low, self.spec.high, out=values)
        if self.spec.dtype.kind in "ui":
            np.rint(values, out=values)
        return values.astype(self.spec.dtype, copy=False)

    def restore(self, privatized: np.ndarray, context) -> np.ndarray:
        return privatized


def _fit_with_numpy(crop: np.ndarray, height: int, width: int) -> np.ndarray:
    """Grey first (one plane to resample instead of three), then area resampling; float32 throughout."""
    if crop.ndim == 3:
        crop = crop[..., :3] @ BGR_TO_GRAY[: crop.shape[2]]
    rows = _resampler(crop.shape[0], height)
    cols = _resampler(crop.shape[1], width)
    return cols.apply(rows.apply(crop, axis=0), axis=1)


def _fit_with_opencv(cv2, crop: np.ndarray, height: int, width: int) -> np.ndarray:
    """The same area resampling by OpenCV's SIMD INTER_AREA on the 8-bit frame, then OpenCV's BT.601 grey
    on the small image, all in 8 bits (the range map is then one table lookup, FitToBundle.levels): less
    time per walkway frame than resizing in 8 bits and mapping grey and range in float. Each 8-bit step
    rounds, so values differ from the float numpy path by at most one source level, the camera's own
    quantization (tests/integration/test_streams.py bounds the difference from OpenCV's float resize)."""
    small = cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)   # a ROI view: no copy needed
    if small.ndim == 2:
        return small
    conversion = cv2.COLOR_BGRA2GRAY if small.shape[2] == 4 else cv2.COLOR_BGR2GRAY
    return cv2.cvtColor(small, conversion)


@lru_cache(maxsize=1)
def _opencv():
    """OpenCV when the board has it (every camera and video source does), else None: numpy only."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def _centre_slices(shape: "tuple[int, int]", aspect: float) -> "tuple[slice, slice]":
    """The largest centred window of ``shape`` with height/width == aspect."""
    rows, cols = shape
    if rows / cols > aspect:
        keep = int(round(cols * aspect))
        start = (rows - keep) // 2
        return slice(start, start + keep), slice(0, cols)
    keep = int(round(rows / aspect))
    start = (cols - keep) // 2
    return slice(0, rows), slice(start, start + keep)


class _AxisResampler:
    """Area resampling along one axis as a few weighted gathers.

    Output pixel i averages the input interval [i, i+1) * n_in / n_out, partial pixels weighted
    by their overlap (what cv2.INTER_AREA does). Each output touches at most
    ceil(n_in / n_out) + 1 inputs, so the resampling is that many gathers, not a dense matmul.
    """

    def __init__(self, n_in: int, n_out: int):
        edges = np.arange(n_out + 1) * (n_in / n_out)
        pixels = np.arange(n_in)
        overlap = (np.minimum(edges[1:, None], pixels + 1) - np.maximum(edges[:-1, None], pixels)).clip(0)
        overlap /= overlap.sum(axis=1, keepdims=True)
        taps = int((overlap > 0).sum(axis=1).max())
        order = np.argsort(overlap == 0, axis=1, kind="stable")[:, :taps]   # overlapping inputs first
        self.index = order.T.copy()                                             # (taps, n_out)
        self.weight = np.take_along_axis(overlap, order, axis=1).T.astype(np.float32)

    def apply(self, array: np.ndarray, axis: int) -> np.ndarray:
        shape = [1] * array.ndim
        shape[axis] = -1
        out = None
        for index, weight in zip(self.index, self.weight):
            term = np.take(array, index, axis=axis) * weight.reshape(shape)
            if out is None:
                out = term
            else:
                out += term
        return out


@lru_cache(maxsize=16)
def _resampler(n_in: int, n_out: int) -> _AxisResampler:
    return _AxisResampler(n_in, n_out)


# -- choosing one -------------------------------------------------------------------------
def is_depth_spec(spec: TensorSpec) -> bool:
    return len(spec.sample_shape) == 2 and ("millimetre" in spec.units or "mm" in spec.units.split())


def source_range(frame: Frame) -> "tuple[float, float]":
    if frame.modality == "depth":
        return 0.0, float(DEPTH_MAX_MM)
    if frame.data.dtype == np.uint8:
        return 0.0, 255.0
    raise InputError(f"cannot tell the value range of a {frame.data.dtype} {frame.modality} frame of shape "
                     f"{frame.data.shape}; expected depth (uint16 mm), 8-bit images, or samples already of the "
                     "bundle's shape")


def make_preprocessor(frame: Frame, spec: TensorSpec, depth_output: str = "patch", declared=None, run_graph=None,
                      options=None):
    """The pre-processor for frames like ``frame`` feeding a bundle with input ``spec``; ``declared``: the
    pre-processor the bundle's manifest declares (runtime.preprocessor.Declared, e.g. a camera bundle's people
    crops), which the frames it ``takes`` go through, built with ``run_graph`` (the bundle's graph runner) and
    the caller's ``options`` for it."""
    if frame.data.shape == spec.sample_shape:
        return Passthrough()
    if declared is not None and declared.takes(frame):
        return declared.make(run_graph, **(options or {}))
    if frame.modality == "depth" and is_depth_spec(spec) and frame.data.ndim == 2 and all(
            have >= need for have, need in zip(frame.data.shape, spec.sample_shape)):
        return DepthPersonPatch(spec.sample_shape, output=depth_output)
    return FitToBundle(spec, source_range(frame))


def to_display(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Sensor units -> uint8 0-255 over [low, high], for previews and 8-bit video sinks."""
    scaled = (np.asarray(values, dtype=np.float32) - np.float32(low)) * np.float32(255.0 / (high - low))
    return np.clip(scaled, 0, 255).astype(np.uint8)
