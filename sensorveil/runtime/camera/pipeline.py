"""The camera pipeline as a bundle's pre-processor: a frame's people found, followed and cropped as one
batch, and the privatized crops pasted back (``PersonCrops``, built from a manifest's ``camera`` entry)."""
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from sensorveil.runtime.camera import learned
from sensorveil.runtime.camera.composite import crop_people, crop_windows, paste_people
from sensorveil.runtime.camera.detect import MotionPeopleDetector, channels_like, opencv, to_gray
from sensorveil.runtime.camera.evidence import PersonEvidence
from sensorveil.runtime.camera.hold import StandingHold
from sensorveil.runtime.camera.scene import SCENE_HORIZON, QuietScene, busy_blocks, starting_scene
from sensorveil.runtime.camera.settings import (
    CROP_MARGIN,
    CROP_SHAPE,
    DEFAULT_PASTE,
    PASTE_MODES,
    PASTE_WINDOW,
    CameraSettings,
)
from sensorveil.runtime.camera.track import Tracker, WalkingDirection
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.preprocessor import Preprocessor

WARMUP_BLOCK = 48          # px per block of the coarse scene releases before the quiet scene (kept for callers)
# a tracked person who has walked this many of their own heights is a person, not a ghost of the first
# frames (those never move): the background model stops learning where they are, so one who stands still
# stays found instead of fading into the empty scene the release is made of (where they showed as a
# silhouette); on walkway.avi a man who stops on the path for about 13 s (frames 490-620 at 10 FPS) is the case
WALKED_IN = 0.5
# frames a tracked person may stay protected: past it the model learns them after all, so a thing that
# moved in and stays for good (a parked trolley of a person's shape) becomes scene; 30 s at 25 FPS
MAX_PROTECT = 750
# OpenCV spreads each image op over a pool of worker threads that wait actively for work. On this pipeline's
# frames that gives no more frames a second and costs about a seventh of its CPU a frame, CPU a board's app
# needs: the pipeline runs its ops on the calling thread and puts the caller's setting back after each call,
# so an app that embeds the runtime keeps its own pool (docs/decisions/0032-opencv-on-the-calling-thread.md)
OPENCV_THREADS = 1


class CropContext(NamedTuple):
    """What ``PersonCrops.prepare`` hands back beside the crops, for ``known``, ``keys`` and ``restore``:
    one row per person found in the frame, in the detector's order (left to right)."""
    frame: np.ndarray           # the camera's frame the crops were cut from
    boxes: np.ndarray           # (N, 4) int (x, y, w, h): each person's box in the frame
    windows: np.ndarray         # (N, 4) int (x0, y0, x1, y1): each crop's window (may run past the frame)
    directions: np.ndarray  # (N,) int: walking directions (1 right, 0 left, -1 too new or too slow; WalkingDirection)
    track_ids: np.ndarray  # (N,) int: each person's id from the tracker
    scene: np.ndarray = None    # the quiet scene as it stood at this frame (cut-out pasting releases it)
    contrast: np.ndarray = None  # and the least gap a substitute keeps from it, per pixel (QuietScene.contrast)


def person_crops_from_manifest(settings, run_graph=None, scene_still=None):
    """The pre-processor a bundle's camera entry describes (``CameraSettings``, or the entry as a dict, parsed
    here); ``run_graph``: the loaded bundle's graph runner, which a pipeline with the learned detector needs;
    ``scene_still``: the operator's picture of the empty place, the released scene's start instead of neutral
    grey."""
    if not isinstance(settings, CameraSettings):
        settings = CameraSettings.from_entry(settings)
    people = None
    if settings.learned:
        people = learned_people(settings, run_graph, MotionPeopleDetector(scale=settings.motion_scale),
                                settings.cuts_out)
    return PersonCrops(settings.crop_shape, detector=people, margin=float(settings.margin), paste=settings.paste,
                       scene_still=scene_still)


@contextmanager
def opencv_threads(count):
    """OpenCV's ops run on ``count`` threads (``cv2.setNumThreads``; process-wide) inside the block, and on as
    many as before it after; ``count`` None leaves OpenCV as it is."""
    if count is None:
        yield
        return
    cv2 = opencv()
    before = cv2.getNumThreads()
    cv2.setNumThreads(count)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


def learned_people(settings, run_graph, motion=None, boxes_follow=False):
    """The learned people detector as a bundle's camera settings (``CameraSettings``) run it: its graph,
    threshold, step, tile rows and height cap. The pipeline gives it its motion detector; a caller that wants the
    graph alone (``find``) leaves ``motion`` out."""
    return learned.LearnedPeopleDetector(
        run_graph, graph=settings.detector_graph, score=settings.detector_score, every=settings.detector_every,
        tile_rows=settings.detector_tile_rows, tallest=settings.detector_tallest, motion=motion,
        boxes_follow=boxes_follow)


class PersonCrops(Preprocessor):
    """The camera pipeline's pre-processor: a frame in, its people's crops out as one batch (the bundle's
    samples, uint8 grey 0-255), and ``restore`` pastes the privatized crops back into the frame.

    ``paste``: "window" pastes each privatized crop over its whole window (a perturbation mechanism's
    output is the person's crop, background included); "cut-out" is for substitution bundles whose
    substitutes are people cut out of their crops (0 = not the person). In both, the frame released around
    the crops is the quiet scene (runtime.camera.scene), never the camera's frame as it is.
    ``keys`` gives the tracker's person ids, so a substitution bundle keeps one substitute per tracked
    person (runtime.stages.substitution.HeldDraws)."""

    name = "person-crops"
    batched = True  # prepare() returns a batch of samples (one per person, maybe none)
    opencv_threads = OPENCV_THREADS   # OpenCV's threads while a frame is prepared or restored (None: as it is)

    def __init__(
        self, crop_shape=CROP_SHAPE, detector=None, margin=CROP_MARGIN, paste=DEFAULT_PASTE, max_protect=MAX_PROTECT,
        scene_still=None, scene_horizon=SCENE_HORIZON,
    ):
        if paste not in PASTE_MODES:
            raise InputError("camera paste mode {!r}; expected one of {}".format(paste, list(PASTE_MODES)))
        self.paste = paste
        self.crop_shape = tuple(int(v) for v in crop_shape)
        self.detector = detector if detector is not None else MotionPeopleDetector()
        self.margin = float(margin)
        self.tracker, self.direction = Tracker(), WalkingDirection()
        self.max_protect = int(max_protect)
        self.hold = StandingHold(self.max_protect)   # people who stopped where no detector finds them
        self.evidence = PersonEvidence()   # which of them get a substitute: found by the graph once, or moving
        # track id -> [first box centre, farthest distance from it in box heights, frames protected]
        self.walked = {}
        self.last_boxes = np.zeros((0, 4), dtype=np.int64)  # the people found in the latest frame
        self.last_windows = np.zeros((0, 4), dtype=np.int64)  # their windows
        self.last_directions = np.zeros(0, dtype=np.int64)  # and their walking directions
        self.last_tracks = np.zeros(0, dtype=np.int64)  # and their track ids (what a held draw is keyed on)
        self.scene_still, self.scene_horizon = scene_still, int(scene_horizon)
        self.scene = None   # QuietScene, made at the first frame (its shape): what cut-out pasting releases

    def prepare(self, frame):
        with opencv_threads(self.opencv_threads):
            return self.crops_of(frame)

    def crops_of(self, frame):
        """``prepare`` itself: the frame's people found and followed, the scene updated, their crops cut."""
        image = frame if isinstance(frame, np.ndarray) else frame.data
        if image.dtype != np.uint8 or image.ndim not in (2, 3) or image.size == 0:
            raise InputError("camera frame of {} {}; expected uint8 HxW or HxWx3 with pixels".format(
                image.dtype, image.shape))
        found = self.detector.detect(image)
        boxes, held = self.hold.extend(found, self.tracker.tracks, self.moving_pixels(),   # this frame's mask
                                       whole=self.whole_boxes(found))
        tracks = self.tracker.update(boxes)
        walked = self.walked_in(boxes, tracks)
        whole = self.whole_boxes(boxes)     # which the learned graph found (None with motion alone)
        self.hold.seen(tracks, boxes, held, self.found_whole(tracks, whole), self.tracker.tracks,
                       fresh=getattr(self.detector, "fresh", True))
        # a held person is protected too: the model that learnt them would lose them, and the hold with them
        self.detector.protect(np.concatenate([walked, boxes[held]]))
        directions = self.direction.update(tracks, boxes)
        # both paste modes release the quiet scene around the people, never the camera's frame: until the
        # detectors are warm (and after a reset) the scene is neutral, so nothing raw goes out meanwhile; every
        # box found stays busy there, a substitute or not
        scene = self.update_scene(image, boxes)
        pasted = self.evidence.paste(tracks, boxes, whole, self.tracker.tracks)
        boxes, directions, tracks = boxes[pasted], np.asarray(directions)[pasted], np.asarray(tracks)[pasted]
        windows = crop_windows(boxes, image.shape, self.crop_shape, self.margin)
        self.last_boxes, self.last_windows, self.last_directions = boxes, windows, directions
        self.last_tracks = tracks
        contrast = self.scene.contrast
        context = CropContext(image, boxes, windows, directions, tracks, scene, contrast)
        return crop_people(image, windows, self.crop_shape), context

    def update_scene(self, image, boxes):
        """The quiet scene after this frame: busy wherever the detector's mask moved, a person was found, or a
        tracked person was last seen (a track the detector lost for a few frames)."""
        if self.scene is None:
            self.scene = QuietScene(image.shape, self.scene_horizon, still=self.scene_still)
        tracked = [state[0] for state in self.tracker.tracks.values()]
        everyone = np.concatenate([np.asarray(boxes, np.float64).reshape(-1, 4),
                                   np.asarray(tracked, np.float64).reshape(-1, 4)]).astype(np.int64)
        busy = busy_blocks(image.shape[:2], self.moving_pixels(), everyone, self.scene.block)
        return self.scene.update_blocks(image, busy)

    def moving_pixels(self):
        """The detector's every moving pixel of the latest frame, before its cleaning (a caller's detector may have
        only the clean mask; None when it has neither)."""
        moving = getattr(self.detector, "raw_foreground", None)
        if moving is None:
            moving = getattr(self.detector, "foreground", None)
        return moving

    def whole_boxes(self, boxes):
        """bool per box: whether the learned detector found it (None with motion alone: no box is known whole)."""
        learned = getattr(self.detector, "learned", None)
        if learned is None:
            return None
        learned = set(map(tuple, np.asarray(learned, dtype=np.int64).reshape(-1, 4)))
        return np.array([tuple(box) in learned for box in np.asarray(boxes, dtype=np.int64).reshape(-1, 4)], bool)

    def found_whole(self, tracks, whole):
        """Which of the tracks' boxes hold a whole person: ``whole``, the learned detector's (it finds people, not
        parts of them), and with motion alone (``whole`` None) a walker's (a blob that walked in is a person; one
        that only flickers is not)."""
        if whole is not None:
            return whole
        return [self.walked.get(int(track), (None, 0.0))[1] >= WALKED_IN for track in tracks]

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

    def known(self, context):
        """What the pipeline knows of each crop: its person's walking direction (for conditioned bundles)."""
        return context.directions

    def keys(self, context):
        """Who each crop is: its tracked person's id (a substitution bundle holds one substitute per id)."""
        return [int(track) for track in context.track_ids]

    def restore(self, privatized, context):
        with opencv_threads(self.opencv_threads):
            return self.pasted(privatized, context)

    def pasted(self, privatized, context):
        """``restore`` itself: the privatized crops pasted on the scene released around them."""
        image, boxes, windows = context.frame, context.boxes, context.windows
        scene = channels_like(self.scene_of(context), image)
        if len(windows) == 0:
            return scene.copy()
        # a substitute bank's crops come back uint8 already: np.rint would round them again in float16
        crops = privatized if privatized.dtype == np.uint8 else \
            np.minimum(np.maximum(np.rint(privatized), 0), 255).astype(np.uint8)
        if crops.ndim == 4 and image.ndim == 2:   # colour substitutes on a grey camera: released in grey
            crops = np.stack([to_gray(crop) for crop in crops])
        if self.paste == PASTE_WINDOW:     # the privatized crop over its whole window, on the quiet scene
            return paste_people(scene, crops, windows)
        return paste_people(scene, crops, windows, scene, boxes=boxes, contrast=context.contrast)

    def scene_of(self, context):
        """The scene of that frame; one made by hand (no scene) gets the neutral scene, never the frame."""
        if context.scene is not None:
            return context.scene
        return starting_scene(context.frame.shape, self.scene_still)

    def empty_scene(self, image):
        """What a cut-out bundle releases around its substitutes now: the quiet scene (runtime.camera.scene),
        which shows the camera only where nobody was seen for ``scene_horizon`` frames, so a person the
        detector misses while they move is left out, not released as the camera saw them."""
        if self.scene is None:
            return starting_scene(image.shape, self.scene_still)
        return channels_like(self.scene.image, image)
