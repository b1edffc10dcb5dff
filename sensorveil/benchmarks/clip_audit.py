"""A camera bundle's release over a clip, measured as its user would: is anyone shown raw (the leak meter), are
the people found (recall against offline reference detectors) and are they still counted (the release's count
against the raw clip's, beside what JPEG quality 90 alone changes); and, beside the goal, whether a conditioned
release's substitutes walk the way their people walk (direction_check).

The bundle runs as `sensorveil run` runs it (``load_for_stream``: torch-free runtime, colour release), over
every frame (its detectors learn as on the device), without retraining and writing nothing. The figures are read
on every JUDGE_EVERY-th frame past WARM_UP (the offline references cost five detector runs a frame):

* leak meter (leak_meter.py): each judged raw frame's people found offline (difference from the clip's median,
  plus the bundle's learned detector on the frame and on overlapping tiles when it carries one); a box the
  pipeline did not cover that the release still shows leaks. Its power: a control ghost blended into the
  release must be caught.
* recall: on every SAMPLE_EVERY-th frame past WARM_UP, the share of those reference people the pipeline's own
  boxes cover (IoU >= 0.3 as detector_recall.found, or at least half the reference box inside a pipeline box:
  the tiled detector may find a large person in parts, each of them protected), with a Wilson interval.

The empty scene the references start from is the clip's median with the people the tiled detector finds left
out (reference_people.empty_scene): on a clip where someone stands at one place for most of it, the plain
median holds that person, and every frame without them would show a "person" there.
* count: each counter (the pipeline's own: the bundle's detector stack; an independent one: the bundle's learned
  detector alone where it carries one, else OpenCV's KNN background model; counter_factories) counts people in the
  raw frame, in the released frame and in the raw frame re-encoded as JPEG 90 (the floor: what any lossy camera
  stream changes); counters with a background model see every frame. Agreement is the share of judged frames whose
  count equals the raw frame's; the release holds when its agreement is within COUNT_POINTS of the floor's. Beside
  it, how many of the raw frame's people the counter finds at their place in the release
  (``released_at_raw_people``: a release box at IoU >= FOUND_IOU, one to one): equal counts can be a coincidence, a
  person missed where someone else is counted (a substitute pasted at a motion fragment), and this figure tells them
  apart. Which way the release is off (``released_more``, ``released_fewer``), and on the recall's frames how often
  each video's count equals the reference people's (``*_same_as_reference``): a release that counts more than raw
  where the raw counter missed someone is nearer the people there are, not further. The goal is still agreement with
  raw, as issue 50 states it; these say why it fails.
"""
import time

import numpy as np

from sensorveil.benchmarks.detector_recall import FOUND_IOU, wilson
from sensorveil.benchmarks.direction_check import DirectionCheck
from sensorveil.benchmarks.leak_meter import LeakMeter, TiledPeople, empty_scene, merge_boxes, offline_boxes
from sensorveil.benchmarks.reference_people import MEDIAN_EVERY, Announced

RECALL_GOAL = 0.85        # share of the reference people the pipeline must cover
COUNT_POINTS = 0.10       # the release's count agreement may fall this far below the JPEG-90 floor's
WARM_UP = 30              # frames the motion model needs before anything is judged
JUDGE_EVERY = 2           # leak meter and count: every other frame (people move little in one frame)
SAMPLE_EVERY = 10         # recall: every 10th frame, as the committed pages score it
FLOOR_QUALITY = 90
PROGRESS_SECONDS = 20.0
# judged frames a count's bootstrap resamples together: consecutive frames show the same people, so they are not
# independent draws (10 judged frames: 20 of the clip's, 2 s at 10 FPS)
COUNT_BLOCK = 10


def read_clip(clip, frames=None) -> list:
    """The clip's first ``frames`` frames (all by default), BGR."""
    import cv2
    capture, out = cv2.VideoCapture(str(clip)), []
    if not capture.isOpened():
        raise ValueError(f"clip: cannot open {clip}; expected a video file OpenCV reads (.avi, .mp4)")
    ok, frame = capture.read()
    while ok and (frames is None or len(out) < frames):
        out.append(frame)
        ok, frame = capture.read()
    capture.release()
    if not out:
        raise ValueError(f"clip: {clip} has no frame OpenCV can decode")
    return out


def jpeg_floor(frame):
    """The frame re-encoded as JPEG FLOOR_QUALITY: what a lossy camera stream alone changes."""
    import cv2
    ok, encoded = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, FLOOR_QUALITY])
    return cv2.imdecode(encoded, cv2.IMREAD_COLOR)


def counter_factories(privatizer) -> dict:
    """name -> (label, factory of a fresh counter frame -> boxes). Each video gets its own counter: they keep a
    background model of what they have seen.

    The goal's two: the pipeline's counter is the bundle's own detector stack (its declared pre-processor, made
    fresh: the learned detector where the bundle carries one, motion, tracker and hold), so the raw frame's count
    is the people the device found and the release's is what the same stack finds of the substitutes; the
    independent one is the learned detector alone where the bundle carries it (the graph at the threshold, tiles
    and height cap fitted to the camera, as the bundle runs it: decision 0026), else OpenCV's KNN model. Shown
    beside the goal, not judged (BESIDE_THE_GOAL): a plain motion counter (MOG2 + tracker), a kind the bundle
    does not run, whose raw count misses people the bundle's detector finds (groups it merges, people standing),
    so the release, which has a substitute for each of them, counts more; and the learned graph at its first
    setting (0.3, square tiles), the independent counter before the detector was fitted to each camera."""
    from sensorveil.runtime.camera import MotionPeopleDetector, PersonCrops
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH, LearnedPeopleDetector
    from sensorveil.runtime.camera.pipeline import learned_people

    pipeline = privatizer.pipeline

    def bundle_stack():
        people = pipeline.declared.make(pipeline.run_graph)
        return lambda frame: people.prepare(frame)[1][1]

    def motion_stack():
        people = PersonCrops()
        return lambda frame: people.prepare(frame)[1][1]

    def learned():
        # the graph alone (find: no motion, no background model), at the settings the bundle runs it with
        return learned_people(pipeline.declared, pipeline.run_graph).find

    def first_setting():
        return LearnedPeopleDetector(pipeline.run_graph).find

    if DETECTOR_GRAPH not in pipeline.graphs:
        return {"pipeline": ("the bundle's own detector (motion + tracker)", bundle_stack),
                "independent": ("OpenCV's KNN background model (the bundle carries no learned detector)",
                                lambda: MotionPeopleDetector(background="knn").detect)}
    # the pipeline's counter and the motion counter keep a background model: they count every frame, read on judged
    return {"pipeline": ("the bundle's own detector (learned + motion + tracker)", bundle_stack),
            "independent": ("the bundle's learned detector alone, at its fitted setting", learned),
            "motion": ("a plain motion counter (MOG2 + tracker), beside the goal", motion_stack),
            "first_setting": ("the learned detector alone at 0.3 on square tiles, beside the goal", first_setting)}


# counters shown on the page but not judged (counter_factories says why)
BESIDE_THE_GOAL = ("motion", "first_setting")
# counters that keep no background model: run on judged frames only
STATELESS = ("independent", "first_setting")


class CountCheck(object):
    """Per counter, the people it counts in the raw, released and JPEG-90 frames. ``stateless``: counters that
    keep no background model, run on judged frames only."""

    def __init__(self, factories: dict, stateless=()):
        self.labels = {name: label for name, (label, _) in factories.items()}
        self.counters = {name: [make() for _ in range(3)] for name, (_, make) in factories.items()}
        self.counts = {name: ([], [], []) for name in factories}
        self.at_place = {name: [0, 0] for name in factories}    # raw people found at their place: release, floor
        self.stateless = set(stateless)
        self.indices = []       # the frame index of each kept count

    def add(self, raw, released, read: bool = True, index=None) -> None:
        """Every counter with a background model sees the frames; the counts are kept where ``read``."""
        floor = jpeg_floor(raw)
        if read:
            self.indices.append(index)
        for name, counters in self.counters.items():
            if name in self.stateless and not read:
                continue
            found = [count(frame) for count, frame in zip(counters, (raw, released, floor))]
            if read:
                for series, people in zip(self.counts[name], found):
                    series.append(len(people))
                self.at_place[name][0] += people_at_their_place(found[0], found[1])
                self.at_place[name][1] += people_at_their_place(found[0], found[2])

    def figures(self, reference=None) -> dict:
        """Per counter, its counts and agreement; with ``reference`` ({frame index: people}, the recall's
        reference people), how often each video's count equals the reference's on those frames: whether a count
        the release gets wrong against raw is nearer the people there are, or further."""
        out = {}
        for name, (raw, released, floor) in self.counts.items():
            raw, released, floor = (np.asarray(s) for s in (raw, released, floor))
            released_at, floor_at = self.at_place[name]
            same, same_floor = float((released == raw).mean()), float((floor == raw).mean())
            out[name] = {"counter": self.labels[name], "frames": int(len(raw)), "raw_people": int(raw.sum()),
                         "released_people": int(released.sum()), "floor_people": int(floor.sum()),
                         "released_at_raw_people": released_at, "floor_at_raw_people": floor_at,
                         "same_count": same, "floor_same_count": same_floor,
                         # which way the release is off: a counter that finds a substitute where it missed the
                         # raw person counts more, one that misses a substitute counts fewer
                         "released_more": float((released > raw).mean()) if len(raw) else 0.0,
                         "released_fewer": float((released < raw).mean()) if len(raw) else 0.0,
                         "holds": same >= same_floor - COUNT_POINTS, "in_goal": name not in BESIDE_THE_GOAL}
            if reference:
                out[name].update(self.against_reference(raw, released, floor, reference))
        return out

    def against_reference(self, raw, released, floor, reference) -> dict:
        keep = [k for k, index in enumerate(self.indices) if index in reference]
        if not keep:
            return {}
        people = np.asarray([reference[self.indices[k]] for k in keep])
        out = {"reference_frames": len(keep)}
        for video, counted in (("raw", raw), ("released", released), ("floor", floor)):
            same = (counted[keep] == people).astype(float)
            out[f"{video}_same_as_reference"] = float(same.mean())
            out[f"{video}_same_as_reference_interval"] = block_interval(same)
            # how far off a frame's count is, in people: a count one short and one five short are not the same
            error = np.abs(counted[keep] - people).astype(float)
            out[f"{video}_error_vs_reference"] = float(error.mean())
            out[f"{video}_error_vs_reference_interval"] = block_interval(error)
        out["reference_people"] = int(people.sum())
        return out


def block_interval(values, block: int = COUNT_BLOCK, resamples: int = 1000, seed: int = 0) -> list:
    """[low, high] 95% bootstrap interval of the mean of per-frame ``values``, resampling runs of ``block``
    consecutive judged frames (moving blocks: neighbouring frames count the same people)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= block:
        return [float(values.min()), float(values.max())] if len(values) else [0.0, 0.0]
    starts = np.random.default_rng(seed).integers(0, len(values) - block + 1,
                                                  size=(resamples, -(-len(values) // block)))
    runs = (starts[..., None] + np.arange(block)).reshape(resamples, -1)[:, :len(values)]
    means = values[runs].mean(axis=1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def people_at_their_place(raw, released) -> int:
    """How many of the ``raw`` boxes have a ``released`` box at IoU >= FOUND_IOU, each released box counted for
    one raw box at most (greedy, best overlap first)."""
    from sensorveil.runtime.camera import iou
    overlap = iou(raw, released)
    matched = 0
    while overlap.size and overlap.max() >= FOUND_IOU:
        i, j = np.unravel_index(np.argmax(overlap), overlap.shape)
        overlap[i, :], overlap[:, j] = -1.0, -1.0
        matched += 1
    return matched


def covered_people(reference, boxes) -> int:
    """How many reference boxes a pipeline box covers: IoU >= FOUND_IOU, or half the reference box inside it."""
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.camera.learned import inside_pairs
    if not len(reference) or not len(boxes):
        return 0
    return int(((iou(reference, boxes) >= FOUND_IOU) | inside_pairs(reference, boxes)).any(1).sum())


class RecallCheck(object):
    """The pipeline's boxes against the reference people, on every SAMPLE_EVERY-th frame past WARM_UP."""

    def __init__(self, empty, tiles=None):
        self.empty, self.tiles = empty, tiles
        self.reference = "difference from the empty scene" + ("" if tiles is None else " + " + tiles.label)
        self.hits = self.total = self.frames = 0
        self.people = {}        # frame index -> reference people on it (the count check compares with it)

    def add(self, index: int, raw, pipeline_boxes) -> None:
        if index < WARM_UP or (index - WARM_UP) % SAMPLE_EVERY:
            return
        people = offline_boxes(raw, self.empty)
        if self.tiles is not None:
            people = merge_boxes(people, self.tiles(index, raw))
        self.frames, self.total = self.frames + 1, self.total + len(people)
        self.people[index] = len(people)
        self.hits += covered_people(people, pipeline_boxes)

    def figures(self) -> dict:
        share = self.hits / self.total if self.total else None
        return {"frames_scored": self.frames, "reference": self.reference, "reference_people": self.total,
                "found": self.hits, "share": share,
                "interval": wilson(self.hits, self.total), "goal": RECALL_GOAL,
                "holds": None if share is None else share >= RECALL_GOAL}


class OncePerFrame(object):
    """``tiles(index, frame)`` computed once per frame index: the empty scene's sampled frames and the leak
    meter's and recall's judged frames are many of the same frames (every 4th and every 2nd)."""

    def __init__(self, tiles):
        self.tiles, self.label, self.boxes = tiles, tiles.label, {}

    def __call__(self, index, frame):
        if index not in self.boxes:
            self.boxes[index] = self.tiles(index, frame)
        return self.boxes[index]


def judged(index: int) -> bool:
    return index >= WARM_UP and (index - WARM_UP) % JUDGE_EVERY == 0


def audit_clip(bundle, clip, frames=None, backend: str = "auto", log=None, scene_still=None, seed=None,
               true_counts=None) -> dict:
    """Leak meter, recall and count of ``bundle``'s release over ``clip`` (its first ``frames`` frames), released
    as ``sensorveil run`` releases it (``scene_still``: the operator's picture of the empty place, as its
    --scene-still). ``seed``: the runtime's replayable seed for the substitutes' draws (a device draws from the
    OS; without a seed two audits of one bundle differ by the draws, with one they give the same figures).
    ``true_counts``: {frame index: people}, a ground truth's count per frame (an annotated clip); the counts are
    then compared with it on every judged frame instead of with the recall's reference people."""
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
    from sensorveil.runtime.camera.scene import neutral_scene
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream

    raw_frames = read_clip(clip, frames)
    privatizer = load_for_stream(bundle, backend=backend, scene_still=scene_still, seed=seed)
    learned = DETECTOR_GRAPH in privatizer.pipeline.graphs
    if log is not None:
        log(f"clip audit: the empty scene from {len(raw_frames)} frames" + (", people left out" if learned else ""))
    # the leak meter's and the reference people's empty scene
    tiles = OncePerFrame(TiledPeople(privatizer.pipeline.run_graph)) if learned else None
    people = Announced(tiles, len(raw_frames[::MEDIAN_EVERY]), log, "clip audit: the empty scene") if learned else None
    empty = empty_scene(raw_frames, people)
    # the neutral grain holds nothing of any frame: a released pixel showing it is not the person now there
    meter = LeakMeter(empty, offline=tiles, fixed=neutral_scene if scene_still is None else None)
    recall = RecallCheck(empty, tiles)
    counts = CountCheck(counter_factories(privatizer), stateless=STATELESS if learned else ())
    directions = DirectionCheck()
    stream = Stream(privatizer, open_source(str(clip), reconnect=False, prefetch=False))
    last = started = time.monotonic()
    for result in stream:
        if result.frame.index >= len(raw_frames):
            break
        index, raw, boxes = result.frame.index, result.frame.data, stream.preprocessor.last_boxes
        meter.follow(index, raw, result.output)     # every frame: which released pixels are older than a person
        if judged(index):
            meter.add(index, raw, result.output, boxes, stream.preprocessor.last_windows)
        recall.add(index, raw, boxes)
        counts.add(raw, result.output, judged(index), index)
        directions.add(index, stream.preprocessor.last_tracks, boxes, stream.preprocessor.last_directions)
        if log is not None and time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            log(f"clip audit: frame {result.frame.index + 1} of {len(raw_frames)}, {last - started:.0f} s")
    return {"clip": str(clip), "frames": len(raw_frames), "frame_size": list(raw_frames[0].shape[1::-1]),
            "scene_still": scene_still is not None, "draw_seed": seed,
            "leak_meter": meter.figures(), "recall": recall.figures(),
            "count": counts.figures(recall.people if true_counts is None else true_counts),
            "count_reference": "reference people" if true_counts is None else "ground truth",
            "direction": directions.figures(privatizer.conditioned_on, seed or 0),
            "bad_frames": stream.report()["bad"]}
