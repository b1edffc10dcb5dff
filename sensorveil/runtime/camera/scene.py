"""The scene a cut-out release pastes its substitutes on, built so that it fails closed.

A background model's picture (MOG2's) learns whatever moves slowly or stands: slow walkers and a standing
group came out of it as translucent people and trails. QuietScene takes a pixel from the camera only where
nothing was seen there for ``horizon`` frames in a row: no motion in the detector's foreground mask, no
detected box and no tracked person (each grown by a block). Until then a region shows the neutral scene (a
fixed grain around mid-grey, or a still the operator gives), never the first raw frames. A person nobody ever
detects and who never moves is the case this cannot see: only a learned detector finds them; the camera audit's
leak meter (sensorveil/benchmarks/leak_meter.py) measures what gets through.

Once a block shows the camera it may only drift, never jump: it follows the new frame only while that block
of the frame is close to what the scene holds (SCENE_CHANGE), and then by at most SCENE_STEP grey levels a
pixel a frame. A block that differs more is busy like a detected person (its neighbours too): its scene
stays as it was. So a person nobody detects who walks into a quiet block, or stands in it for good, is never
learnt; that block stays stale for as long as it differs (a lighting jump larger than SCENE_CHANGE does the
same), which fails closed: an old picture of the empty place, never a new one with someone in it.
"""
from functools import lru_cache

import numpy as np

from sensorveil.runtime.camera.detect import MAX_PERSON_HEIGHT, opencv
from sensorveil.runtime.errors import InputError

SCENE_BLOCK = 8          # px: the scene is judged quiet or busy per block of this size
SCENE_HORIZON = 100      # frames a block must stay quiet before the camera may show it (10 s at 10 FPS)
NEUTRAL_GREY = 128       # the neutral scene's mean grey level: the scene before any block is quiet
# The neutral scene is a fixed grain around NEUTRAL_GREY, not flat grey: an independent counter of the release
# (the learned detector) found about half the substitutes pasted on flat grey and nearly as many as raw on a
# grain near the size of its own features (docs/decisions/0029-neutral-grain.md). The grain is made from a fixed
# seed, so it holds nothing of any frame and every device releases the same one.
NEUTRAL_GRAIN = 10       # grey levels: the grain's nodes' standard deviation (the pixels between them: about 7)
GRAIN_ROWS = 45          # the grain's cells down the frame (8 px at 360 rows), whatever the frame's size
GRAIN_SEED = 29
# grey levels: a camera block whose mean absolute difference from the scene (the largest of its colour
# channels) is above this has changed (someone is there), not been lit differently: above the noise and light
# of the blocks the scene follows, below what a person adds to a block (both measured by
# scripts/scene_gate_threshold.py; figures in docs/decisions/0006-scene-change-gate.md)
SCENE_CHANGE = 6.0
# A block that starts showing the camera replaces the neutral scene at once, and a background-model counter
# downstream reads the change as something new: a person, where the revealed region stands upright (revealed
# one by one as they became quiet, they were most of a counter's extra people on walkway). So blocks are
# revealed together, once every REVEAL_EVERY frames (a
# counter absorbs one reveal before the next), and only as regions no counter takes for a person: wider than
# tall, or taller than TALLEST_PERSON; an upright region waits (grey) until it has grown into one of those.
# Both only hold back camera pixels, so the release can only show less. docs/decisions/0010-scene-reveals.md
REVEAL_EVERY = SCENE_HORIZON
TALLEST_PERSON = MAX_PERSON_HEIGHT
# grey levels a camera pixel may move a frame: lighting drifts slower; a person who walks in slowly enough
# to stay under SCENE_CHANGE each frame would have to stay in step with this to be learnt, and does not
SCENE_STEP = 2
# least grey-level gap between a pasted substitute and the neutral scene: none, as on the camera's blocks. On flat
# grey it was 70 (decision 0011: a background-model counter's flat, noiseless block), and the learned detector
# missed the substitutes it moved; on the grain the motion counter finds them without it (decision 0029)
NEUTRAL_CONTRAST = 0
# least grey-level gap on a picture of the place (the camera's blocks, or an operator's still): none. There a
# substitute keeps its own colours: it stands on the place's own ground, which a background-model counter tells
# it from, and the gap (with SHADOW_RATIO's darkening) made the learned detector miss the substitutes it moved
# while the motion counter did not need it (docs/decisions/0016-own-colours-on-the-place.md)
CAMERA_CONTRAST = 0
# share of a person's box width and height the scene counts as busy around it, each way: a learned box that
# stops at the knees or an arm still keeps the scene from learning the rest (a crop window's CROP_MARGIN is
# smaller: it frames the person for the model, this keeps the person out of the released scene)
BUSY_MARGIN = 0.25


class QuietScene(object):
    """``update(frame, busy)`` after each frame; ``image`` is the scene to release around the people.

    A block shows the neutral scene until it has been quiet for ``horizon`` frames, then the camera. A camera
    block follows the frame only while it stays within ``change`` grey levels of the scene (mean absolute
    difference); one that differs more counts as busy, so a person nobody detects is never learnt, moving or
    standing still: the block stays stale, the place as it was, for as long as they are there."""

    def __init__(self, shape, horizon=SCENE_HORIZON, block=SCENE_BLOCK, still=None, change=SCENE_CHANGE,
                 reveal_every=None, tallest=TALLEST_PERSON, neutral_contrast=NEUTRAL_CONTRAST):
        self.horizon, self.block, self.change = int(horizon), int(block), float(change)
        self.reveal_every = self.horizon if reveal_every is None else int(reveal_every)
        # a horizon of 0 would take every block as quiet, busy ones included: the camera's people released
        for field in ("horizon", "block", "reveal_every"):
            if getattr(self, field) < 1:
                raise InputError("quiet scene {} {!r}; expected a whole number of at least 1 ({})".format(
                    field, getattr(self, field), "frames" if field != "block" else "px"))
        self.tallest = int(tallest)
        self.updates = 0
        self.image = starting_scene(shape, still)
        blocks = (-(-shape[0] // self.block), -(-shape[1] // self.block))
        self.quiet = np.zeros(blocks, dtype=np.int32)     # frames in a row each block has been quiet
        self.shown = np.zeros(blocks, dtype=bool)         # blocks that show the camera (else the neutral scene)
        # pixels of each block (edge blocks are cut by the frame): the divisor of a block's mean
        self.pixels = block_sums(np.ones(shape[:2], dtype=np.uint8), self.block)
        # an operator's still is a picture like the camera's: its blocks take the camera's gap
        self.neutral_contrast = CAMERA_CONTRAST if still is not None else int(neutral_contrast)
        self.contrast = self.contrast_map()

    def update(self, frame, busy):
        """``busy``: bool (H, W), True where a person is or may be in this frame. A new array each time, so a
        scene handed to an earlier frame's restore() is never changed under it."""
        return self.update_blocks(frame, block_any(busy, self.block))

    def update_blocks(self, frame, busy):
        """``update`` with ``busy`` given per block (``busy_blocks``): the pipeline's way, which never builds
        the frame-sized mask (the same blocks, for less CPU a frame)."""
        self.updates += 1
        changed = self.shown & (self.difference(frame) > self.change)
        busy_blocks = dilate(busy | changed)
        self.quiet = np.where(busy_blocks, 0, np.minimum(self.quiet + 1, self.horizon))
        ready = self.quiet >= self.horizon
        if ready.any():
            revealed = self.revealed(ready & ~self.shown)
            image = self.image.copy()
            if revealed.any():      # once every reveal_every updates at most
                masked_copy(frame, self.pixels_of(revealed), image)       # neutral -> camera
            masked_copy(step_towards(self.image, frame, SCENE_STEP), self.pixels_of(ready & self.shown), image)
            self.shown = self.shown | revealed
            self.image = image
            if revealed.any():
                self.contrast = self.contrast_map()
        return self.image

    def contrast_map(self):
        """(H, W) int16: the least grey-level gap a substitute pasted on each pixel keeps from the scene,
        CAMERA_CONTRAST (none) on the camera's blocks, ``neutral_contrast`` on the neutral scene's. A new array
        each time the blocks shown change, so an earlier frame's map is never changed under it."""
        neutral = self.pixels_of(~self.shown).astype(bool)
        return np.where(neutral, self.neutral_contrast, CAMERA_CONTRAST).astype(np.int16)

    def revealed(self, pending):
        """The blocks of ``pending`` (quiet for the horizon, not yet shown) that start showing the camera on
        this update: none between REVEAL_EVERY updates, else those of unpersonlike_regions."""
        if self.updates % self.reveal_every or not pending.any():
            return np.zeros_like(pending)
        return unpersonlike_regions(pending, self.block, self.tallest)

    def difference(self, frame):
        """Each block's mean absolute difference between ``frame`` and the scene: the largest over colour
        channels, so a person of another hue but the same brightness still counts."""
        sums = block_sums(opencv().absdiff(frame, self.image), self.block)
        return (sums if sums.ndim == 2 else sums.max(axis=2)) / self.pixels

    def pixels_of(self, blocks):
        """(blocks) bool -> (H, W) uint8, 1 on the frame's pixels of those blocks: an OpenCV mask."""
        h, w = self.image.shape[:2]
        # rows repeated, then each row's blocks repeated as a trailing axis (contiguous runs): less CPU than
        # copying out a broadcast of the whole frame
        rows = blocks.astype(np.uint8).repeat(self.block, axis=0)[:h]
        pixels = rows.reshape(rows.shape + (1,)).repeat(self.block, axis=2).reshape(len(rows), -1)
        return np.ascontiguousarray(pixels[:, :w])


def masked_copy(source, mask, target):
    """``target`` takes ``source``'s pixels where ``mask`` (uint8 H x W) is set, in place. OpenCV's masked copy,
    many times faster than numpy's copyto(where=) with a broadcast mask (the step's CPU time: python
    scripts/pipeline_cost.py); OpenCV 3 (Debian buster's, on the Coral's Mendel) has no cv2.copyTo: numpy there."""
    cv2 = opencv()
    if hasattr(cv2, "copyTo"):
        copied = cv2.copyTo(source, mask, target)
        if copied is not target:      # a binding that allocated its own output rather than fill ours
            np.copyto(target, copied)
        return
    where = mask.astype(bool)
    np.copyto(target, source, where=where if target.ndim == 2 else where[..., None])


def step_towards(scene, frame, step):
    """``scene`` moved towards ``frame`` by at most ``step`` grey levels a pixel: the scene drifts, never jumps.
    In uint8 throughout: OpenCV's saturating subtraction gives max(frame - scene, 0) and max(scene - frame, 0),
    and neither sum nor difference leaves 0..255 (up is at most frame - scene, down at most scene - frame). The
    limit is an array, not a number: OpenCV applies a number to the first colour channel only."""
    cv2 = opencv()
    limit = np.full(scene.shape, step, dtype=np.uint8)
    up, down = cv2.subtract(frame, scene), cv2.subtract(scene, frame)
    up = cv2.min(up, limit, dst=up)     # in place where the binding fills dst; its result either way
    down = cv2.min(down, limit, dst=down)
    up = cv2.add(scene, up, dst=up)
    return cv2.subtract(up, down, dst=up)


def unpersonlike_regions(blocks, block, tallest=TALLEST_PERSON):
    """The connected regions (eight neighbours) of ``blocks`` that a counter would not take for a person: no
    taller than wide, or taller than ``tallest`` px."""
    _, labels, stats, _ = opencv().connectedComponentsWithStats(blocks.astype(np.uint8), connectivity=8)
    width, height = stats[:, 2], stats[:, 3]         # cv2.CC_STAT_WIDTH, CC_STAT_HEIGHT, in blocks
    keep = (height <= width) | (height * block > tallest)
    keep[0] = False                                  # label 0: the blocks not in ``blocks``
    return keep[labels]


def block_sums(values, block):
    """(H, W[, C]) -> (ceil(H / block), ceil(W / block)[, C]): each block's sum (int32 for uint8 values), blocks
    cut by the frame's edge summing what they hold. Read off the integral image at the block corners: one
    pass of OpenCV's integral, then four corners a block, instead of a sum over every pixel. Values other than
    uint8 are summed in float64, exact for integers below 2**53."""
    cv2 = opencv()
    small = values.dtype == np.uint8
    table = cv2.integral(np.ascontiguousarray(values if small else values.astype(np.float64)),
                         sdepth=cv2.CV_32S if small else cv2.CV_64F)      # (H + 1, W + 1[, C])
    h, w = values.shape[:2]
    corners = table[np.append(np.arange(0, h, block), h)][:, np.append(np.arange(0, w, block), w)]
    sums = corners[1:, 1:] - corners[:-1, 1:] - corners[1:, :-1] + corners[:-1, :-1]
    return sums if small else np.rint(sums).astype(np.int64)


def starting_scene(shape, still=None):
    """The scene before any block is quiet: the operator's still, else the neutral grain; nothing of any frame.
    A colour still serves a grey camera as its grey; any other difference of shape or type is refused."""
    if still is None:
        return neutral_scene(tuple(shape)).copy()
    still = np.asarray(still)
    if still.dtype != np.uint8:   # a cast would wrap or round what the operator meant the place to look like
        raise InputError("scene_still of dtype {}; expected uint8 pixels like the camera's".format(still.dtype))
    if still.ndim == 3 and still.shape[2] == 3 and len(shape) == 2 and still.shape[:2] == tuple(shape):
        return opencv().cvtColor(still, opencv().COLOR_BGR2GRAY)
    if tuple(still.shape) != tuple(shape):
        raise InputError("scene still of shape {}; expected the camera's {} (scene_still: a picture of the empty "
                         "place at the camera's size)".format(still.shape, tuple(shape)))
    return np.array(still, dtype=np.uint8)


@lru_cache(maxsize=4)
def neutral_scene(shape):
    """(H, W[, C]) uint8: the neutral grain, grey in every channel. Normal noise on a grid of GRAIN_ROWS cells down
    the frame, smoothly scaled to it, NEUTRAL_GRAIN grey levels about NEUTRAL_GREY: made from GRAIN_SEED alone.
    Cached per shape; callers get a copy (starting_scene)."""
    cv2 = opencv()
    height, width = shape[:2]
    cell = max(1, int(round(height / float(GRAIN_ROWS))))
    noise = np.random.RandomState(GRAIN_SEED).standard_normal((height // cell + 1, width // cell + 1))
    grain = cv2.resize(noise.astype(np.float32), (width, height), interpolation=cv2.INTER_LINEAR)
    grey = np.clip(np.rint(NEUTRAL_GREY + NEUTRAL_GRAIN * grain), 1, 255).astype(np.uint8)
    scene = grey if len(shape) == 2 else np.repeat(grey[..., None], shape[2], axis=2)
    scene.flags.writeable = False     # the cached one is shared: a caller that writes to it must copy it
    return scene


def read_scene_still(path) -> np.ndarray:
    """An operator's picture of the empty place (any image file OpenCV reads), BGR uint8 like a camera's frame."""
    cv2 = opencv()
    still = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if still is None:
        raise InputError("--scene-still {}: not an image file OpenCV can read; expected a picture (PNG, JPEG) of "
                         "the empty place at the camera's size".format(path))
    return still


def block_any(mask, block):
    """(H, W) bool or uint8 -> (ceil(H / block), ceil(W / block)) bool: whether any pixel of each block is set
    (non-zero). Each pixel takes the largest of the block x block pixels right of and below it (OpenCV's dilation,
    nothing beyond the frame), so every block's top-left pixel holds its block's answer."""
    pixels = np.ascontiguousarray(mask) if mask.dtype == np.uint8 else \
        np.ascontiguousarray(mask, dtype=bool).view(np.uint8)
    grown = opencv().dilate(pixels, np.ones((block, block), np.uint8), anchor=(0, 0))
    return grown[::block, ::block] > 0


def dilate(blocks):
    """Each set block and its eight neighbours: a person's edge the mask missed is still busy."""
    grown = blocks.copy()
    grown[1:] |= blocks[:-1]
    grown[:-1] |= blocks[1:]
    wide = grown.copy()
    wide[:, 1:] |= grown[:, :-1]
    wide[:, :-1] |= grown[:, 1:]
    return wide


def busy_blocks(shape, foreground, boxes, block=SCENE_BLOCK, margin=BUSY_MARGIN):
    """``block_any(busy_mask(shape, foreground, boxes, margin), block)``, block by block: the foreground's blocks
    and each grown box's (the blocks its pixel rows and columns in the frame fall in), without a frame-sized
    mask."""
    height, width = shape[:2]
    blocks = (block_any(foreground, block) if foreground is not None else
              np.ones((-(-height // block), -(-width // block)), dtype=bool))
    for top, bottom, left, right in grown_spans(boxes, margin):
        bottom, right = min(bottom, height), min(right, width)
        if bottom > top and right > left:      # the pixels busy_mask sets: none where the box lies off the frame
            blocks[top // block:(bottom - 1) // block + 1, left // block:(right - 1) // block + 1] = True
    return blocks


def grown_spans(boxes, margin=BUSY_MARGIN):
    """(top, bottom, left, right) pixel spans of each (x, y, w, h) box grown by ``margin`` of its width and height
    each way (at least a pixel), cut at the frame's top and left (its bottom and right: the caller's)."""
    for x, y, w, h in np.asarray(boxes, dtype=np.int64).reshape(-1, 4):
        grow_x, grow_y = int(np.ceil(margin * max(w, 1))), int(np.ceil(margin * max(h, 1)))
        yield max(y - grow_y, 0), max(y + h + grow_y, 0), max(x - grow_x, 0), max(x + w + grow_x, 0)


def busy_mask(shape, foreground, boxes, margin=BUSY_MARGIN):
    """Where a person is or may be: the foreground mask (all of the frame when the detector has none) and every
    box grown by ``margin`` of its width and height each way (at least a pixel): a detector's box often cuts off
    a standing person's feet or an arm, and a part nobody covers for SCENE_HORIZON frames would be learnt into
    the released scene, and stay there after they leave."""
    busy = np.ones(shape, dtype=bool) if foreground is None else foreground.astype(bool)
    for top, bottom, left, right in grown_spans(boxes, margin):
        busy[top:bottom, left:right] = True
    return busy
