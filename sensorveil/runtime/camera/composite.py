"""Cutting people out of a frame as fixed-size grey crops, and pasting the privatized crops back:
the crop windows, the cut-out people made to stand out from the scene and kept apart."""
import numpy as np

from sensorveil.runtime.camera.detect import BGR_TO_GRAY, opencv, to_gray
from sensorveil.runtime.camera.settings import CROP_MARGIN, CROP_SHAPE

# least grey-level gap between a pasted substitute and the scene behind it, so a downstream counter still
# finds every pasted person (docs/decisions/0001-camera-paste.md; the count it keeps: docs/camera_results.md)
PERSON_CONTRAST = 100
# a pasted darker pixel stays below this share of the scene's grey: not a shadow to MOG2 (tau 0.5)
SHADOW_RATIO = 0.45
# least (x, y) pixels between two pasted substitutes: more than the downstream counter's closing
# kernel (5x9) bridges once the substitutes are thickened by a pixel, so people the detector found
# apart stay apart (docs/decisions/0001-camera-paste.md)
PERSON_GAP = (6, 8)
# of a person partly hidden behind nearer ones, the least share that must stay in view as one piece to be pasted
# (keep_apart): a piece that small is a head or an arm on its own, no person to a viewer or a detector
LEAST_IN_VIEW = 1.0 / 3
THICKEN = np.ones((3, 3), dtype=np.uint8)     # a pasted person's mask grows by a pixel each way (fit_person)
# box height (frame pixels) from which a pasted person is not thickened: there a limb is 3 px or more, which a
# counter's 3x3 opening keeps, and a pixel more each way made walkers squat blocks the learned detector missed
# (docs/substitute_detection.md; docs/decisions/0019-slimmer-walkers.md)
THICKEN_BELOW = 60


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
    """The window's pixels, edge-replicated where it runs past the frame (a view of ``gray`` where it does not:
    callers only read it)."""
    x0, y0, x1, y1 = (int(v) for v in window)
    if 0 <= x0 < x1 <= gray.shape[1] and 0 <= y0 < y1 <= gray.shape[0]:
        return gray[y0:y1, x0:x1]
    rows = np.clip(np.arange(y0, y1), 0, gray.shape[0] - 1)
    cols = np.clip(np.arange(x0, x1), 0, gray.shape[1] - 1)
    return gray[rows[:, None], cols[None, :]]


def crop_people(frame, windows, crop_shape=CROP_SHAPE, colour=False):
    """(N, H, W) uint8 grey crops of ``windows`` (from :func:`crop_windows`), area-resampled; with
    ``colour``, (N, H, W, 3) crops of a colour frame as it is."""
    cv2 = opencv()
    # grey is per pixel, so each window is turned grey after it is cut: the same pixels as cutting from the
    # grey frame, for the people's pixels only rather than the whole frame's
    grey = (lambda pixels: pixels) if colour or frame.ndim == 2 else to_gray
    out = np.empty((len(windows),) + tuple(crop_shape) + (frame.shape[2:] if colour else ()), dtype=np.uint8)
    for k, window in enumerate(windows):
        out[k] = cv2.resize(grey(cut(frame, window)), (crop_shape[1], crop_shape[0]), interpolation=cv2.INTER_AREA)
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
    blob, _ = largest_blob(cut_out > 0)
    if blob is None:
        return cut_out.copy()
    solid = cv2.morphologyEx(blob.astype(np.uint8), cv2.MORPH_CLOSE,
                             cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 9)))
    # closed gaps take the blurred grey of the person around them (0 is reserved for "not the person")
    filled = np.maximum(cv2.blur(cut_out, (5, 5)), 1)
    return np.where(solid > 0, np.where(cut_out > 0, cut_out, filled), 0).astype(np.uint8)


def largest_blob(mask):
    """(the largest 8-connected blob of a boolean ``mask``, as a mask; its pixel count), or (None, 0) where the
    mask holds nothing."""
    cv2 = opencv()
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if count <= 1:
        return None, 0
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return labels == largest, int(stats[largest, cv2.CC_STAT_AREA])


# what a substitute's cut-out must look like to be pasted (person_shaped), as shares of the crop (CROP_MARGIN
# grows a person's box by 15% a side, so a whole person is about three quarters of the crop's height): one blob,
# taller than wide as one person is (two people side by side are about as wide as tall), solid enough
PERSON_SHAPE = {"min_height": 0.5, "aspect": (1.6, 5.0), "min_fill": 0.25, "min_area": 0.08}


def person_shaped(cut_out, shape=PERSON_SHAPE):
    """Whether a cut-out (0 = not the person; grey, or colour H x W x 3) is one person: a single 8-connected
    blob, at least ``min_height`` of the crop tall, its box's height over width within ``aspect``, filling
    ``min_fill`` of its box and ``min_area`` of the crop. A mask that holds two people, a piece of one or a
    smear of background is not, and is never pasted."""
    cv2 = opencv()
    cut_out = np.asarray(cut_out)
    mask = (cut_out.max(axis=2) if cut_out.ndim == 3 else cut_out) > 0
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if count != 2:
        return False
    _, _, width, height, area = (int(v) for v in stats[1])
    low, high = shape["aspect"]
    return bool(height >= shape["min_height"] * mask.shape[0] and low <= height / float(width) <= high
                and area >= shape["min_fill"] * width * height and area >= shape["min_area"] * mask.size)


def stand_out(person, scene, margin=PERSON_CONTRAST):
    """A pasted person's grey levels moved at least ``margin`` away from the ``scene`` behind them, each
    pixel on the side it already is (lighter or darker; where that side has no room left, the other);
    ``margin`` a number or an array of the scene's shape.
    A substitute cut from another place can match this place's ground in parts (light trousers on
    light pavement); a background-model counter downstream then sees only the rest of the person, too
    short or too squat to count, so the person the camera saw would be missing from the output.
    A darker pixel also goes below ``SHADOW_RATIO`` of the scene: a background model (MOG2's default
    tau is 0.5) reads a grey pixel between half the scene's brightness and the scene as a shadow and
    drops it, so on bright pavement (above 200) ``margin`` alone would leave a dark person a shadow.
    A ``margin`` of 0 leaves the pixel as the person has it (no gap, no shadow rule): the quiet scene asks for
    none on a picture of the place (scene.CAMERA_CONTRAST)."""
    person, scene = np.asarray(person, dtype=np.int16), np.asarray(scene, dtype=np.int16)
    lighter = np.where(person != scene, person > scene, scene < 128)
    lighter = np.where(scene + margin > 255, False, np.where(scene - margin < 0, True, lighter))
    darkest = np.minimum(scene - margin, np.floor(SHADOW_RATIO * scene)).astype(np.int16)
    moved = np.where(lighter, np.maximum(person, scene + margin), np.minimum(person, darkest))
    moved = np.where(np.asarray(margin) == 0, person, moved)
    # 0..255 already (lighter only where scene + margin <= 255, darkest >= 0): only 0 is taken, "not the person"
    return np.maximum(moved, 1).astype(np.uint8)


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


def paste_people(frame, crops, windows, background=None, boxes=None, contrast=None):
    """A copy of ``frame`` with each crop resized into its window (clipped to the frame); grey crops
    go into every channel of a colour frame. With ``background`` (the empty scene, frame-shaped) the
    crops are cut-outs: every window is first cleared to the background, erasing whoever stood there,
    and then only the crops' non-zero pixels (the substitute people) are pasted on it; clearing all
    windows before pasting any keeps one person's window from erasing a neighbour's substitute. With
    ``boxes`` (the detected people, (x, y, w, h)) each substitute person is scaled to its box's height at their
    own proportions (own_width), so a downstream detector finds a person of the same place and height as in the
    raw frame;
    ``contrast`` (frame-sized) is the least gap each pasted pixel keeps from the scene (PERSON_CONTRAST
    without one)."""
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
    fitted = [fit_person(np.asarray(crop, dtype=np.uint8), window, None if boxes is None else boxes[k])
              for k, (crop, window) in enumerate(zip(crops, windows))]
    boxed = [k for k, (_, _, _, _, in_box) in enumerate(fitted) if in_box]
    moved = stand_out_people([fitted[k][2] for k in boxed], [fitted[k][:2] for k in boxed], background, contrast)
    placed = [list(person[:4]) for person in fitted]
    for k, patch in zip(boxed, moved):
        placed[k][2] = patch
    for (x, y, patch, person) in keep_apart(placed):
        paste_window(out, patch, x, y, person)
    return out


def place_person(crop, window, box, background, contrast=None):
    """(x, y, patch, mask) of one cut-out (grey, or colour H x W x 3) pasted at its place: the person
    scaled to ``box`` (fit_person) and made to stand out from the scene behind it, or, without a box (or a
    cut-out holding nobody), the whole crop over its window."""
    x, y, patch, person, in_box = fit_person(crop, window, box)
    if in_box:
        patch = stand_out_people([patch], [(x, y)], background, contrast)[0]
    return x, y, patch, person


def fit_person(crop, window, box):
    """(x, y, patch, mask, in_box) of one cut-out before it is made to stand out: the person scaled to ``box``'s
    height at their own proportions, centred across it (in_box True; own_width), or, without a box (or a cut-out
    holding nobody), the whole crop over its window."""
    cv2 = opencv()
    x0, y0, x1, y1 = window
    # the person: any channel set (an OR of the channels: numpy's any over the last axis is far slower)
    shape = (crop[..., 0] | crop[..., 1] | crop[..., 2]) > 0 if crop.ndim == 3 else crop > 0
    bounds = person_bounds(shape) if box is not None else None
    if bounds is None:      # the person over the whole window, as the crop has it
        x, y, w, h = x0, y0, x1 - x0, y1 - y0
    else:
        crop, shape = crop[bounds[0]:bounds[1], bounds[2]:bounds[3]], shape[bounds[0]:bounds[1], bounds[2]:bounds[3]]
        x, y, w, h = (int(v) for v in box)
        x, w = own_width(shape.shape, x, w, h)
    size = (max(w, 1), max(h, 1))
    patch = cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR)
    person = cv2.resize(shape.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
    if bounds is not None and h < THICKEN_BELOW:     # limbs a pixel or two wide vanish in a 3x3 opening
        person = cv2.dilate(person, THICKEN)
    return x, y, patch, person.astype(bool), bounds is not None


def own_width(person_shape, x, w, h):
    """(x, w) across a box of a person of ``person_shape`` (rows, cols) scaled to the box's height ``h``: their own
    width, centred in the box and never wider than it. Stretched to a box wider than one person (a group, a bag,
    a shadow the detector took in) a substitute becomes a squat blob that a detector downstream does not read as
    a person (scripts/substitute_detection.py measures it)."""
    width = max(int(w), 1)      # a degenerate box still gets a pixel-wide person at its own x, as before
    own = max(1, min(width, int(round(h * person_shape[1] / max(person_shape[0], 1)))))
    return int(x) + (width - own) // 2, own


def stand_out_people(patches, corners, background, contrast=None):
    """Each patch (grey, or colour H x W x 3, its top-left corner at ``corners``' (x, y)) made to stand out from
    the scene behind it (stand_out, stand_out_colour). Both work pixel by pixel, so every person's pixels go
    through them in one call, laid end to end: the same pixels as a call per person, without a numpy call's
    overhead per person (most of the cost of pasting a few small people)."""
    if not patches:
        return []
    wheres = [(x, y, x + patch.shape[1], y + patch.shape[0]) for patch, (x, y) in zip(patches, corners)]
    margin = PERSON_CONTRAST if contrast is None else end_to_end([cut(contrast, where) for where in wheres])
    if not np.any(margin):      # no gap asked anywhere (the quiet scene's default): the people as they are
        return [np.maximum(patch, 1) for patch in patches]
    scene = to_gray(end_to_end([cut(background, where) for where in wheres]))
    pixels = end_to_end(patches)
    moved = stand_out(pixels, scene, margin) if pixels.ndim == 2 else stand_out_colour(pixels, scene, margin)
    ends = np.cumsum([patch.shape[0] * patch.shape[1] for patch in patches])[:-1]
    return [part.reshape(patch.shape) for part, patch in zip(np.split(moved[0], ends), patches)]


def end_to_end(images):
    """(H, W[, C]) images -> one (1, sum of H x W[, C]) image of all their pixels, row by row."""
    return np.concatenate([image.reshape((-1,) + image.shape[2:]) for image in images])[None]


def stand_out_colour(patch, scene, margin=PERSON_CONTRAST):
    """:func:`stand_out` for a colour person: each pixel's colour scaled so its grey level is the one
    stand_out gives, so a counter on grey sees the same person the grey paste gives it."""
    grey = to_gray(patch).astype(np.float32)
    moved = stand_out(grey.astype(np.uint8), scene, margin).astype(np.float32)
    scaled = np.minimum(patch.astype(np.float32) * ((moved + 1.0) / (grey + 1.0))[..., None], 255.0)
    # a saturated colour scaled up clips its brightest channel at 255 and falls short of its grey level (pure
    # blue reads grey 29 however far it is scaled): lift what clipping left toward white, which raises the grey
    # level linearly, by just the share that reaches it. Scaling down never clips: those pixels are exact.
    reached = grey_of(scaled)
    lift = np.clip((moved - reached) / np.maximum(255.0 - reached, 1.0), 0.0, 1.0)
    scaled += lift[..., None] * (255.0 - scaled)
    out = np.minimum(np.maximum(np.rint(scaled), 1), 255).astype(np.uint8)
    # no gap asked (margin 0): the person's own colours, exactly (scaling by a grey ratio of 1 rounds them)
    own = np.broadcast_to(np.asarray(margin) == 0, grey.shape)
    return np.where(own[..., None], np.maximum(patch, 1), out).astype(np.uint8)


def grey_of(pixels):
    """BGR_TO_GRAY's float grey of float32 (..., 3) pixels, summed channel by channel: each pixel's grey is the
    same whatever array it is in (a matmul's last bit depends on the array's shape)."""
    blue, green, red = BGR_TO_GRAY
    return pixels[..., 0] * blue + pixels[..., 1] * green + pixels[..., 2] * red


def keep_apart(placed, gap=PERSON_GAP):
    """The placed people as a camera above the ground sees them: the nearest first (the lowest feet in the
    frame), each whole but for what nearer people hide, with every pixel closer than ``gap`` (x, y) pixels to a
    nearer person taken out of the farther one. The detector found them as separate people in the camera's
    frame, but substitutes scaled to their boxes fill what was between two people walking side by side;
    touching, they would be one blob to a people counter downstream, one person fewer than the camera saw.
    Taking the shared pixels out of both people instead left pieces of each (a head off its body, a pair of
    legs) in a crowd (docs/decisions/0025-nearest-in-front.md). Of a person partly hidden only the largest
    piece in view is pasted, and only where it is at least LEAST_IN_VIEW of them: less is hidden, as a person
    standing behind others is in the camera's own frame."""
    if len(placed) < 2:
        return placed
    cv2 = opencv()
    ring = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * gap[0] + 1, 2 * gap[1] + 1))
    left = min(p[0] for p in placed) - gap[0]
    top = min(p[1] for p in placed) - gap[1]
    width = max(p[0] + p[3].shape[1] for p in placed) + gap[0] - left
    height = max(p[1] + p[3].shape[0] for p in placed) + gap[1] - top
    taken = np.zeros((height, width), dtype=bool)       # the near zones of the people placed in front
    apart, order = list(placed), nearest_first(placed)
    for k in order:
        x, y, patch, person = placed[k]
        rows, cols = slice(y - top, y - top + person.shape[0]), slice(x - left, x - left + person.shape[1])
        shown = in_view(person & ~taken[rows, cols], person)
        apart[k] = (x, y, patch, shown)
        if k == order[-1]:      # nobody stands behind the farthest person: their zone would hide no one
            break
        # the zone reaches no further than the person's own rectangle grown by the gap (on the canvas, which
        # runs a gap past every person), so the dilation needs no more of the canvas
        near = np.zeros((person.shape[0] + 2 * gap[1], person.shape[1] + 2 * gap[0]), dtype=np.uint8)
        near[gap[1]:gap[1] + person.shape[0], gap[0]:gap[0] + person.shape[1]] = shown
        top0, left0 = y - top - gap[1], x - left - gap[0]
        taken[top0:top0 + near.shape[0], left0:left0 + near.shape[1]] |= cv2.dilate(near, ring) > 0
    return apart


def nearest_first(placed):
    """The indices of the placed people (x, y, patch, mask), nearest the camera first: the lowest bottom edge
    in the frame (feet on the ground, seen from above), the first placed first among equals."""
    return sorted(range(len(placed)), key=lambda k: (-(placed[k][1] + placed[k][3].shape[0]), k))


def in_view(shown, person):
    """What is pasted of a person (``person``, a mask) of whom nearer people leave ``shown``: all of them where
    none is hidden; else the largest 8-connected piece in view where it holds at least LEAST_IN_VIEW of their
    pixels, and nothing where it does not."""
    if np.array_equal(shown, person):
        return person
    piece, area = largest_blob(shown)
    if piece is None or area < LEAST_IN_VIEW * np.count_nonzero(person):
        return np.zeros_like(person)
    return piece
