"""A crowded still-camera scene built from walkway.avi's own people, with the truth of who is where.

Walkway shows a few people at a time and nobody stands for long. This builds a clip of the same camera with
several times as many: the clip's colour median is the empty scene; each frame's people are cut out of it
where they differ from that scene (the leak meter's offline boxes and person pixels); frame t of the crowd
is the empty scene with the people of frames t, t + shift, t + 2 shift, ... of the original (every other
layer mirrored, so people walk both ways across each other), and a group of people taken from one frame
standing still for the whole clip. Every pasted person's box is recorded per frame: the truth a detector's
recall and the leak meter are scored against. The people are real, their arrangement is made; the clip is
written outside the repository (it is derived from walkway.avi, under OpenCV's licence).
"""
import json

import numpy as np

from sensorveil.benchmarks.reference_people import PERSON_DIFF, offline_boxes, to_grey

LAYERS = 4           # time-shifted copies of the clip's people in each frame
STANDING = 6         # people from one frame who stand for the whole clip
MIN_PIXELS = 40      # a cut-out with fewer person pixels is noise, not a person


def read_clip(path):
    import cv2
    capture, frames = cv2.VideoCapture(str(path)), []
    ok, frame = capture.read()
    while ok:
        frames.append(frame)
        ok, frame = capture.read()
    fps = capture.get(cv2.CAP_PROP_FPS) or 10.0
    capture.release()
    return frames, fps


def people_of(frame, empty_grey):
    """[(box, mask)] of the frame's people: offline boxes, person pixels inside each (cleaned)."""
    import cv2
    grey, out = to_grey(frame), []
    for x, y, w, h in offline_boxes(frame, empty_grey):
        mask = (np.abs(grey[y:y + h, x:x + w] - empty_grey[y:y + h, x:x + w]) > PERSON_DIFF).astype(np.uint8)
        mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, np.ones((5, 3), np.uint8)).astype(bool)
        if mask.sum() >= MIN_PIXELS:
            out.append(((int(x), int(y), int(w), int(h)), mask))
    return out


def paste(canvas, source, box, mask, mirror):
    """One person from ``source`` onto ``canvas``; mirrored about the frame's centre line when asked.
    Returns the box where they now are."""
    x, y, w, h = box
    sprite, shape = source[y:y + h, x:x + w], mask
    if mirror:
        sprite, shape, x = sprite[:, ::-1], shape[:, ::-1], canvas.shape[1] - x - w
    region = canvas[y:y + h, x:x + w]
    region[shape] = sprite[shape]
    return [int(x), int(y), int(w), int(h)]


def standing_group(frames, empty_grey, count):
    """``count`` people of the frame that shows the most, to stand for the whole clip: (frame, people)."""
    best = max(range(0, len(frames), 10), key=lambda k: len(people_of(frames[k], empty_grey)))
    return frames[best], people_of(frames[best], empty_grey)[:count]


def build_crowd(frames, layers=LAYERS, standing=STANDING):
    """(crowd frames, per-frame truth boxes, the standing boxes, the empty scene)."""
    empty = np.median(np.stack(frames[::4]), axis=0).astype(np.uint8)
    empty_grey = to_grey(empty)
    people = [people_of(frame, empty_grey) for frame in frames]
    group_frame, group = standing_group(frames, empty_grey, standing)
    shift = len(frames) // layers
    crowd, truth = [], []
    for t in range(len(frames)):
        canvas, boxes = empty.copy(), []
        for box, mask in group:
            boxes.append(paste(canvas, group_frame, box, mask, mirror=True))
        for layer in range(layers):
            source = (t + layer * shift) % len(frames)
            for box, mask in people[source]:
                boxes.append(paste(canvas, frames[source], box, mask, mirror=layer % 2 == 1))
        crowd.append(canvas)
        truth.append(boxes)
    return crowd, truth, [b for b, _ in group], empty


def write_crowd(source, out, layers=LAYERS, standing=STANDING):
    """Write the crowd clip (MJPG .avi), its truth (``out`` + .json: boxes per frame, the standing group, how
    it was made) and its empty scene (``out`` + .empty.png). Returns the truth record."""
    import cv2
    frames, fps = read_clip(source)
    crowd, truth, group, empty = build_crowd(frames, layers, standing)
    cv2.imwrite(str(out) + ".empty.png", empty)       # the scene without anyone: the leak meter's reference
    height, width = crowd[0].shape[:2]
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
    for frame in crowd:
        writer.write(frame)
    writer.release()
    record = {"source": str(getattr(source, "name", source)), "layers": layers, "standing": group,
              "frames": len(crowd), "fps": fps, "people_per_frame_mean": float(np.mean([len(b) for b in truth])),
              "boxes": truth}
    with open(str(out) + ".json", "w") as handle:
        json.dump(record, handle)
    return record
