"""The camera pipeline's learned people detector: a graph of the bundle, united with the motion detector.

Motion alone cannot see a person who stands, and merges people in a crowd; the learned detector (a COCO
SSDLite-MobileNetV2 graph the exporter puts in the bundle: sensorveil.export.person_detector) finds
people whether they move or not. The two are united: every learned box, plus every motion box the learned
ones do not already cover, so a person either source sees is protected. The learned graph may run every
``every`` frames; between runs its last boxes stand (a person who stood stays covered, one who walks is
motion's), which costs recall only for a person who walks in and is missed by motion for that long.

The graph: one input (1, H, W, 3) uint8 RGB, one output (1, N, 6): ymin, xmin, ymax, xmax (0-1),
score, class. Graphs exported since the detector's second form stop before the SSD's own non-maximum
suppression (its loops are what TFLite, TensorRT and the NCS2 cannot run, and most of its cost): they return
every anchor's decoded box and person score, and this module suppresses the overlaps of the people, in numpy.
The first form's graphs (suppressed in the graph, at most 100 rows) pass through the same suppression
unchanged.

The third form (the int8 TFLite and Edge TPU graphs) stops before the SSD's box coder, whose EXP, UNPACK and
float tail the Edge TPU cannot run: its output is (1, N, 5), each anchor's box encoding (ty, tx, th, tw) and
person logit, all int8 with one scale. Its graph entry names an ``anchors`` file of the bundle (hashed and
signed as every listed file), a (1 + N, 4) float32 .npy: the box coder's scale factors (10, 10, 5, 5), then
each anchor's ycenter, xcenter, height and width, read out of the frozen graph at export. This module decodes
the rows as the graph's own coder does (``decode``) and goes on as with the second form. Runs on the boards'
own Python (3.6): no annotations import, no f-strings.
"""
import io

import numpy as np

from sensorveil.runtime.camera.detect import MotionPeopleDetector, opencv
from sensorveil.runtime.camera.settings import (  # noqa: F401 - the detector's manifest fields, read where they are used
    ANCHORS_KEY,
    ANCHORS_SUFFIX,
    COCO_PERSON,
    DEFAULT_EVERY,
    DEFAULT_SCORE,
    DEFAULT_TALLEST,
    DEFAULT_TILE_ROWS,
    DETECTOR_GRAPH,
    DETECTOR_KIND,
    EVERY_RANGE,
    GRAPH_SCORE_KEY,
    MOTION_SCALE,
    MOTION_SCALE_RANGE,
    SCORE_RANGE,
    TALLEST_RANGE,
    TILE_ROWS_RANGE,
)
from sensorveil.runtime.camera.track import iou
from sensorveil.runtime.errors import InputError, OutputError

DETECTOR_INPUT = (300, 300)         # the graph's input height and width
DETECTOR_OUTPUT = "detections"
OVERLAP_IOU = 0.6                   # boxes overlapping more are one person (the SSD config's own NMS threshold)
MIN_HEIGHT = 12                     # px: a learned box shorter than this is not a person at this frame's scale
COVERED = 0.5                       # a motion box whose area is this much inside a learned box is that person
# from this many frames after the graph's run, a learned box moves with its walker until the graph runs again
# (``follow_walkers``): the motion boxes that overlap it by PARTLY (IoU) or lie inside it are theirs, and it is
# centred on them, so motion's pieces of that walker stay inside it and the walker gets one substitute, not one for
# the standing box and more for motion's pieces. Never reached with the graph every 3 frames or more often; with it
# every 10 (export's --camera-speed fast) it keeps a counter on the release from seeing people twice
# (docs/decisions/0012-camera-speed-preset.md; it dropped such boxes before decision 0034)
STALE_AFTER = 3
PARTLY = 0.1
# a motion blob wider than this many of a learned box's widths is a group's: its centre is no one's, the box stays
GROUP_WIDTH = 1.5
# motion's blobs of a walker this share of their box's height or taller reach their feet: the box stands on them
FEET_SHOWN = 0.5
# neighbouring smaller tiles (detector_tiles' rows) share this share of their side: a person one tile cuts is
# whole in the next, up to a quarter of a tile wide
TILE_OVERLAP = 0.25
# a box on one of the smaller tiles taller than this share of the tile is dropped: at the low thresholds a camera
# of small people is fitted to, the graph answers a smaller tile with boxes most of its height over groups and
# empty ground (a substitute several people tall); a person that tall is whole on a square tile, where the graph
# sees them at a higher score
SMALL_TILE_TALLEST = 0.6
DECODED_WIDTH = 6                   # ymin, xmin, ymax, xmax, score, class
ENCODED_WIDTH = 5                   # ty, tx, th, tw, person logit


class LearnedPeopleDetector(object):
    """``detect(frame)`` -> int (N, 4) boxes (x, y, w, h) in frame pixels: the learned graph's people united
    with the motion detector's. ``run_graph(graph, batch)``: the loaded bundle's graph runner
    (Privatizer.pipeline.run_graph). The motion detector's background model and foreground mask stay what the
    pipeline reads (``protect``, ``foreground``)."""

    def __init__(self, run_graph, graph=DETECTOR_GRAPH, score=DEFAULT_SCORE, every=DEFAULT_EVERY, motion=None,
                 person_class=COCO_PERSON, input_size=DETECTOR_INPUT, box_coder=None, boxes_follow=False,
                 tile_rows=DEFAULT_TILE_ROWS, tallest=DEFAULT_TALLEST):
        if run_graph is None:
            raise InputError("the learned people detector needs the bundle's graphs "
                             "(Privatizer.pipeline.run_graph); expected a loaded bundle, got none")
        self.run_graph, self.graph = run_graph, graph
        self.score, self.every, self.person_class = float(score), int(every), int(person_class)
        self.tile_rows, self.tallest = int(tile_rows), float(tallest)
        self.input_size = tuple(int(v) for v in input_size)
        self.motion = motion if motion is not None else MotionPeopleDetector(scale=MOTION_SCALE)
        self.cv2 = opencv()
        self.seen = 0
        self.learned = np.zeros((0, 4), dtype=np.int64)   # the last run's people
        self.fresh = False      # whether the graph ran on the latest frame (else its last boxes stand)
        # move the boxes with their walkers (``follow_walkers``) only where a moved box hides a person rather than
        # shows them: a cut-out release, which shows nothing of the camera where a person may be; a window paste
        # releases the camera's frame around its windows, so a standing person whose box moved would go out as they are
        self.boxes_follow = bool(boxes_follow)
        # (scales, anchors) of a graph that returns box encodings: given, or the bundle's own file
        self.box_coder = box_coder if box_coder is not None else bundle_box_coder(run_graph, graph)

    @property
    def foreground(self):
        return getattr(self.motion, "foreground", None)

    @property
    def raw_foreground(self):
        return getattr(self.motion, "raw_foreground", None)

    def protect(self, boxes):
        self.motion.protect(boxes)

    def detect(self, frame):
        moving = self.motion.detect(frame)
        since = self.seen % self.every
        self.fresh = since == 0
        if since == 0:
            self.learned = self.find(frame)
        elif since >= STALE_AFTER and self.boxes_follow:
            self.learned = follow_walkers(self.learned, moving)
        self.seen += 1
        return unite(self.learned, moving)

    def find(self, frame):
        """The learned graph's people in this frame, found on its tiles (``detector_tiles``)."""
        found = []
        squares = len(square_tiles(frame.shape[0], frame.shape[1]))
        for number, (top, left, side) in enumerate(detector_tiles(frame.shape[0], frame.shape[1], self.tile_rows)):
            boxes = self.find_in(frame[top:top + side, left:left + side], self.tallest * frame.shape[0])
            if number >= squares:
                boxes = on_small_tile(boxes, side)
            found.append(boxes + np.array([left, top, 0, 0], dtype=np.int64))
        return merge_tiles(np.concatenate(found))

    def find_in(self, tile, tallest=None):
        """The graph's people in one tile, in its pixels; none taller than ``tallest`` pixels below DEFAULT_SCORE
        (``capped``)."""
        height, width = self.input_size
        # shrunk first, then made RGB: the area average is per channel, so the pixels are those of shrinking the
        # RGB tile, without first copying a full tile through a reversed-channel view
        small = self.cv2.resize(tile if tile.ndim == 2 else np.ascontiguousarray(tile[..., :3]), (width, height),
                                interpolation=self.cv2.INTER_AREA)
        image = self.cv2.cvtColor(small, self.cv2.COLOR_GRAY2RGB if tile.ndim == 2 else self.cv2.COLOR_BGR2RGB)
        rows = np.asarray(self.run_graph(self.graph, image[None]))
        boxes = people_boxes(rows, tile.shape, self.score, self.person_class, self.box_coder)
        if tallest is None or self.score >= DEFAULT_SCORE:
            return boxes
        return capped(boxes, tallest, lambda: people_boxes(rows, tile.shape, DEFAULT_SCORE, self.person_class,
                                                           self.box_coder))


def capped(boxes, tallest, sure):
    """``boxes`` (found below DEFAULT_SCORE) with those taller than ``tallest`` pixels replaced by the tall ones of
    ``sure()`` (the same rows at DEFAULT_SCORE): a box several people tall is kept only where the graph is as sure
    of it as the bundles' first setting asked (settings.DEFAULT_TALLEST)."""
    tall = boxes[:, 3] > tallest
    if not tall.any():
        return boxes
    found = sure()
    return np.concatenate([boxes[~tall], found[found[:, 3] > tallest]])


def square_tiles(height, width):
    """(top, left, side) of the square tiles the graph looks at: side the frame's short side, as many as cover
    the long side, spread evenly (overlapping where it is no multiple of the short side). The graph's input is
    square: a 16:9 frame squeezed into it makes everyone half as wide, and the SSD then misses people it finds
    at once in a square tile, standing people seen from behind most of all (docs/decisions/0014). Each tile
    costs one run of the graph: two for 4:3 and 16:9 frames."""
    side, longer = min(height, width), max(height, width)
    count = -(-longer // side)
    starts = [int(round(v)) for v in np.linspace(0, longer - side, count)] if count > 1 else [0]
    if width >= height:
        return [(0, start, side) for start in starts]
    return [(start, 0, side) for start in starts]


def detector_tiles(height, width, rows=DEFAULT_TILE_ROWS):
    """(top, left, side) of every tile the graph looks at: the frame's ``square_tiles``, and for ``rows`` of 2 a
    grid of smaller square tiles, ``rows`` of them across the short side, overlapping by TILE_OVERLAP. In the
    smaller tiles a person far from the camera fills more of the graph's 300x300 input: on two fetched cameras
    the square tiles alone found fewer than half of the people (docs/detector_fit.md, decision 0024). Each
    tile is one run of the graph: 8 for a 4:3 frame with 2 rows, 10 for 16:9."""
    if isinstance(rows, bool) or not isinstance(rows, int) or not TILE_ROWS_RANGE[0] <= rows <= TILE_ROWS_RANGE[1]:
        raise InputError("detector tile rows {!r}; expected a whole number from {} to {}".format(
            rows, *TILE_ROWS_RANGE))
    tiles = square_tiles(height, width)
    if rows == 1:
        return tiles
    side = int(round(min(height, width) / (rows - (rows - 1) * TILE_OVERLAP)))
    return tiles + [(top, left, side) for top in tile_starts(height, side) for left in tile_starts(width, side)]


def on_small_tile(boxes, side):
    """The boxes found on one of the smaller tiles (``side`` pixels) that are a person's: none taller than
    SMALL_TILE_TALLEST of the tile."""
    return boxes[boxes[:, 3] <= SMALL_TILE_TALLEST * side]


def tile_starts(length, side):
    """Where tiles of ``side`` start along ``length``: as few as cover it with neighbours overlapping by about
    TILE_OVERLAP (a pixel less where ``side`` was rounded), spread evenly."""
    count = int(np.ceil(max(length - side, 0) / (side * (1 - TILE_OVERLAP)) - 0.02)) + 1
    return [int(v) for v in np.linspace(0, length - side, count).round()]


def merge_tiles(boxes):
    """One box per person from overlapping tiles: largest first, a box kept unless it overlaps a kept one by
    OVERLAP_IOU or lies mostly (COVERED of its area) inside one: a person at a tile's edge is found whole in the
    next tile and cut in this one."""
    boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    order = np.argsort(-(boxes[:, 2] * boxes[:, 3]), kind="stable")
    kept = np.zeros((0, 4), dtype=np.int64)
    for box in boxes[order]:
        if len(kept) and ((iou(box[None], kept) > OVERLAP_IOU).any() or inside_pairs(box[None], kept).any()):
            continue
        kept = np.concatenate([kept, box[None]])
    return kept


def people_boxes(rows, frame_shape, score, person_class=COCO_PERSON, box_coder=None):
    """(1, N, 6) detections, or with ``box_coder`` (1, N, 5) box encodings (``decode``) -> int (M, 4) boxes
    (x, y, w, h) of the people at or above ``score``, once each (overlaps suppressed), clipped to the frame. A
    graph that returns anything else, or non-finite values, is an OutputError: the frame is not released (a
    stream counts it as a bad frame) rather than released with no one found."""
    if box_coder is not None:
        rows = decode(rows, box_coder, person_class)
    elif rows.ndim == 3 and rows.shape[2] == ENCODED_WIDTH:
        raise OutputError("the person detector returned box encodings {} {} but its bundle entry names no {!r} "
                          "file to decode them with; expected (1, N, 6) decoded detections, so this frame is not "
                          "released".format(rows.dtype, rows.shape, ANCHORS_KEY))
    if rows.ndim != 3 or rows.shape[0] != 1 or rows.shape[2] != DECODED_WIDTH or not np.isfinite(rows).all():
        raise OutputError("the person detector returned {} {}; expected finite (1, N, 6) detections, so this "
                          "frame is not released".format(rows.dtype, rows.shape))
    rows = rows[0]
    keep = suppress(rows[(np.rint(rows[:, 5]) == person_class) & (rows[:, 4] >= score)], OVERLAP_IOU)
    height, width = frame_shape[:2]
    top, left = np.clip(keep[:, 0], 0, 1) * height, np.clip(keep[:, 1], 0, 1) * width
    bottom, right = np.clip(keep[:, 2], 0, 1) * height, np.clip(keep[:, 3], 0, 1) * width
    boxes = np.stack([np.floor(left), np.floor(top), np.ceil(right - left), np.ceil(bottom - top)], 1)
    boxes = boxes[(boxes[:, 3] >= MIN_HEIGHT) & (boxes[:, 2] >= 2)].astype(np.int64)
    return boxes.reshape(-1, 4)


def decode(rows, box_coder, person_class=COCO_PERSON):
    """(1, N, 5) rows (ty, tx, th, tw, person logit) -> (1, N, 6) detections, as the SSD's faster-rcnn box
    coder decodes them: ycenter = ty / 10 * ha + ya, h = exp(th / 5) * ha (likewise x and w), score =
    sigmoid(logit). Rows of any other shape, or not finite before or after decoding, are an OutputError."""
    scales, anchors = box_coder
    rows = np.asarray(rows)
    if rows.ndim != 3 or rows.shape[0] != 1 or rows.shape[1:] != (len(anchors), ENCODED_WIDTH) \
            or not np.isfinite(rows).all():
        raise OutputError("the person detector returned {} {}; expected finite (1, {}, {}) box encodings (one "
                          "row per anchor of its {!r} file), so this frame is not released".format(
                              rows.dtype, rows.shape, len(anchors), ENCODED_WIDTH, ANCHORS_KEY))
    codes = rows[0].astype(np.float32)
    ycenter, xcenter, height, width = anchors.T
    with np.errstate(over="ignore"):
        ycenter = codes[:, 0] / scales[0] * height + ycenter
        xcenter = codes[:, 1] / scales[1] * width + xcenter
        height = np.exp(codes[:, 2] / scales[2]) * height
        width = np.exp(codes[:, 3] / scales[3]) * width
        score = 1.0 / (1.0 + np.exp(-codes[:, 4]))
    boxes = np.stack([ycenter - height / 2, xcenter - width / 2, ycenter + height / 2, xcenter + width / 2,
                      score, np.full_like(score, person_class)], axis=1)
    if not np.isfinite(boxes).all():
        raise OutputError("the person detector's box encodings decode to non-finite boxes (largest |th|, |tw| "
                          "{:.3g}); expected finite boxes, so this frame is not released".format(
                              float(np.abs(codes[:, 2:4]).max())))
    return boxes[None].astype(np.float32)


def load_box_coder(data, name):
    """(scales (4,), anchors (N, 4)) from the bytes of the bundle's anchors file ``name``: a (1 + N, 4)
    float .npy, the scale factors first, every value finite, scales and anchor sizes above 0. Anything else is
    an InputError naming the file."""
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise InputError("the person detector's anchors file {!r} is not a .npy array ({}); expected a (1 + N, 4) "
                         "float array".format(name, error))
    if not isinstance(array, np.ndarray) or array.dtype.kind != "f" or array.ndim != 2 or array.shape[0] < 2 \
            or array.shape[1] != 4 or not np.isfinite(array).all() or not (array[0] > 0).all() \
            or not (array[1:, 2:] > 0).all():
        raise InputError("the person detector's anchors file {!r} holds {} {}; expected a finite (1 + N, 4) float "
                         "array: the box coder's 4 scale factors, then each anchor's ycenter, xcenter, height, "
                         "width (scales and sizes above 0)".format(name, getattr(array, "dtype", type(array)),
                                                                    getattr(array, "shape", "")))
    array = array.astype(np.float32)
    return array[0], array[1:]


def bundle_box_coder(run_graph, graph):
    """The (scales, anchors) the loaded bundle behind ``run_graph`` (Privatizer.pipeline.run_graph) ships for
    ``graph`` (its entry's ``anchors`` file, the verified bytes); None for a graph that decodes its own boxes."""
    pipeline = getattr(run_graph, "__self__", None)
    bundle = getattr(pipeline, "bundle", None)
    if bundle is None or not hasattr(bundle, "graph_artifact"):
        return None
    name = bundle.graph_artifact(pipeline.backend_name, graph).get(ANCHORS_KEY)
    return None if name is None else load_box_coder(bundle.read(name), name)


def suppress(rows, iou):
    """Greedy non-maximum suppression of (K, 6) rows (ymin, xmin, ymax, xmax, score, class), best score first:
    a row whose box overlaps a kept one by more than ``iou`` (intersection over union) is the same person."""
    rows = rows[np.argsort(-rows[:, 4], kind="stable")]
    areas = np.maximum(rows[:, 2] - rows[:, 0], 0) * np.maximum(rows[:, 3] - rows[:, 1], 0)
    kept, left = [], np.arange(len(rows))
    while left.size:
        best, left = left[0], left[1:]
        kept.append(best)
        inter_h = np.maximum(np.minimum(rows[best, 2], rows[left, 2]) - np.maximum(rows[best, 0], rows[left, 0]), 0)
        inter_w = np.maximum(np.minimum(rows[best, 3], rows[left, 3]) - np.maximum(rows[best, 1], rows[left, 1]), 0)
        inter = inter_h * inter_w
        left = left[inter <= iou * np.maximum(areas[best] + areas[left] - inter, 1e-12)]
    return rows[kept].reshape(-1, 6)


def unite(learned, moving):
    """Every learned box, plus each motion box that is not mostly inside one: a person either source sees,
    once. Left to right, as the motion detector orders them."""
    learned = np.asarray(learned, dtype=np.int64).reshape(-1, 4)
    moving = np.asarray(moving, dtype=np.int64).reshape(-1, 4)
    extra = moving[~inside_pairs(moving, learned).any(axis=1)]
    boxes = sorted(map(tuple, np.concatenate([learned, extra])))
    return np.asarray(boxes, dtype=np.int64).reshape(-1, 4)


def follow_walkers(learned, moving):
    """The learned boxes moved with their walkers: each motion box that overlaps a learned box by PARTLY or more, or
    lies inside it, belongs to the one it overlaps most, and a box with motion of its own is centred across it (and
    stands on its feet where the motion is FEET_SHOWN of the box tall or more). A box no motion touches stays: a
    person who stands; one whose motion is a group's (GROUP_WIDTH) stays too."""
    learned = np.asarray(learned, dtype=np.int64).reshape(-1, 4).copy()
    moving = np.asarray(moving, dtype=np.int64).reshape(-1, 4)
    if not len(learned) or not len(moving):
        return learned
    overlap = iou(moving, learned)
    near = (overlap >= PARTLY) | inside_pairs(moving, learned)
    owner = np.where(near.any(axis=1), np.argmax(np.where(near, overlap + 1e-9, -1.0), axis=1), -1)
    for k in np.unique(owner[owner >= 0]):
        theirs = moving[owner == k]
        left, top = theirs[:, 0].min(), theirs[:, 1].min()
        right, bottom = (theirs[:, 0] + theirs[:, 2]).max(), (theirs[:, 1] + theirs[:, 3]).max()
        _, _, width, height = learned[k]
        if right - left > GROUP_WIDTH * width:
            continue
        learned[k, 0] = int(round((left + right) / 2.0 - width / 2.0))
        if bottom - top >= FEET_SHOWN * height:
            learned[k, 1] = int(bottom - height)
    return learned


def covered(box, boxes):
    """Whether ``COVERED`` or more of ``box``'s area lies inside one of ``boxes``."""
    return bool(inside_pairs(np.asarray(box, dtype=np.int64).reshape(1, 4), boxes).any())


def inside_pairs(boxes, others):
    """(N, M) bool: whether ``COVERED`` or more of box i's area lies inside other j, all pairs at once (a crowd has
    dozens of each, every frame)."""
    boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    others = np.asarray(others, dtype=np.int64).reshape(-1, 4)
    inside_w = np.minimum(boxes[:, None, 0] + boxes[:, None, 2], others[None, :, 0] + others[None, :, 2]) - \
        np.maximum(boxes[:, None, 0], others[None, :, 0])
    inside_h = np.minimum(boxes[:, None, 1] + boxes[:, None, 3], others[None, :, 1] + others[None, :, 3]) - \
        np.maximum(boxes[:, None, 1], others[None, :, 1])
    area = np.maximum(boxes[:, 2] * boxes[:, 3], 1)[:, None]
    return (inside_w > 0) & (inside_h > 0) & (inside_w * inside_h >= COVERED * area)
