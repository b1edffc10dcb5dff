"""Keeping a person who stops: the box of a tracked person both detectors lost, held while the place shows them.

A person who walks in and then stands with their back to the camera fades out of both detectors: the learned
one does not find a person seen from behind, and the motion detector sees nothing once nobody moves. Left out,
the release shows the empty place there (privacy holds) but drops them from its count. So a track the frame's
whole boxes no longer cover keeps its last whole box, once it has stood still, for as long as the motion detector's
foreground still fills part of it: the background model does not learn a held box (PersonCrops protects it), so a
person who stands on stays foreground there, and the place goes back to the model's empty scene once they leave,
which ends the hold (docs/decisions/0018-standing-hold.md).
Runs on the boards' own Python (3.6): no annotations import, no f-strings.
"""
import numpy as np

from sensorveil.runtime.camera.learned import inside_pairs
from sensorveil.runtime.camera.track import iou

# share of a held box's pixels that must still be foreground for the hold to go on: low, because a person the model
# had half learnt before the hold began keeps only a little of it (one-by-one's woman at the table, decision 0018);
# an empty place the model knows fills next to none
HOLD_FOREGROUND = 0.04
# times in a row a track must have been found whole near where that run began before it may be held: a person who
# has stopped; a walker is not held (their box left behind would be a second substitute beside the one they walk on)
HOLD_AFTER_STILL = 3
# how far a whole box's centre may move from the run's first, in box heights, for the person to count as still: on
# walkway a couple walking slowly in the distance moved less than this between sightings, and their old box was held
STILL_REACH = 0.15
# a whole box of this frame overlapping a held candidate by this much (IoU) is that person found again: the
# candidate is not held beside it
SAME_PERSON_IOU = 0.2


class StandingHold(object):
    """``extend(boxes, tracks, foreground)`` -> (boxes, held): this frame's boxes and the held ones, left to right,
    and which rows are held, given the tracker's live tracks (id -> [last box, frames unseen], before this frame's
    update) and the motion detector's raw foreground (uint8 0/255, frame-sized; None: nothing is held, there is no
    evidence). ``seen(ids, boxes, held, whole, live)`` after the tracker's update remembers each track's box to
    hold. A track is held for at most ``max_hold`` frames in all."""

    def __init__(self, max_hold, share=HOLD_FOREGROUND, after=HOLD_AFTER_STILL):
        self.max_hold, self.share, self.after = int(max_hold), float(share), int(after)
        self.still = {}     # track id -> fresh whole sightings in a row within STILL_REACH of its anchor
        self.whole = {}     # track id -> its latest box a detector found whole (the learned one's, or a walker's)
        self.anchor = {}    # track id -> its whole box where its current run of still sightings began
        self.held = {}      # track id -> frames held

    def extend(self, boxes, tracks, foreground, whole=None):
        """``whole``: bool per box, whether a detector found it whole (the learned detector's box; None: every box).
        A track's whole box that no whole box of this frame overlaps is held while the foreground fills enough of it,
        and the boxes inside it that are not whole (motion's fragments of that person) go."""
        boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
        whole = np.ones(len(boxes), dtype=bool) if whole is None else np.asarray(whole, dtype=bool)
        keep = []
        if foreground is not None:
            for track in sorted(tracks):
                box = self.whole.get(track)
                if box is None or self.still.get(track, 0) < self.after or self.held.get(track, 0) >= self.max_hold:
                    continue
                if whole.any() and (iou(box[None], boxes[whole]) >= SAME_PERSON_IOU).any():
                    continue    # found again, whole: the track goes on with this frame's box
                if foreground_share(foreground, box, others=boxes) >= self.share:
                    self.held[track] = self.held.get(track, 0) + 1
                    keep.append(box)
        if keep and len(boxes):
            inside = inside_pairs(boxes, np.asarray(keep, dtype=np.int64).reshape(-1, 4)).any(axis=1)
            boxes, whole = boxes[~(inside & ~whole)], whole[~(inside & ~whole)]
        held = np.zeros(len(boxes) + len(keep), dtype=bool)
        if not keep:
            return boxes, held
        everyone = np.concatenate([boxes, np.asarray(keep, dtype=np.int64).reshape(-1, 4)])
        held[len(boxes):] = True
        order = sorted(range(len(everyone)), key=lambda k: tuple(everyone[k]))
        return everyone[order], held[order]

    def seen(self, ids, boxes, held, whole, live, fresh=True):
        """After the tracker's update: ``ids`` of this frame's ``boxes``, ``held`` which of them were held, ``whole``
        which were found whole (a person, not a part: the learned detector's box, or a tracked walker's), ``live``
        the tracks the tracker keeps; ``fresh``: whether the whole boxes are new sightings (False while the learned
        detector's last boxes stand between its runs: a walker's box would look still)."""
        for track, box, was_held, is_whole in zip(ids, np.asarray(boxes, dtype=np.int64).reshape(-1, 4), held, whole):
            if was_held or not is_whole:
                continue
            if not fresh and int(track) in self.whole:
                continue
            anchor = self.anchor.get(int(track))
            if anchor is not None and moved(anchor, box) <= STILL_REACH:
                self.still[int(track)] = self.still.get(int(track), 0) + 1
            else:           # moved on since the run began (a slow walker drifts out of reach within a few sightings)
                self.anchor[int(track)], self.still[int(track)] = box, 0
            self.whole[int(track)] = box
        for gone in set(self.whole) - set(live):
            del self.whole[gone]
            self.anchor.pop(gone, None)
            self.still.pop(gone, None)
            self.held.pop(gone, None)


def moved(before, after):
    """How far a box's centre moved, in the larger of the two boxes' heights."""
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    shift = (after[:2] + after[2:] / 2.0) - (before[:2] + before[2:] / 2.0)
    return float(np.hypot(*shift)) / max(before[3], after[3], 1.0)


def foreground_share(foreground, box, others=()):
    """The share of ``box``'s pixels (within the frame) that ``foreground`` (uint8 0/255) sets, leaving out the pixels
    of ``others`` that do not lie inside it: what moves there that no one else found this frame accounts for (a
    neighbour's foreground reaching into an empty box is not the held person; the held person's own parts are)."""
    x, y, w, h = (int(v) for v in box)
    x0, y0 = max(x, 0), max(y, 0)
    patch = foreground[y0:max(y + h, 0), x0:max(x + w, 0)]
    if not patch.size:
        return 0.0
    others = np.asarray(others, dtype=np.int64).reshape(-1, 4)
    others = others[~inside_pairs(others, np.asarray(box, dtype=np.int64).reshape(1, 4))[:, 0]]
    if len(others):
        patch = patch.copy()
        for ox, oy, ow, oh in others:
            patch[max(oy - y0, 0):max(oy + oh - y0, 0), max(ox - x0, 0):max(ox + ow - x0, 0)] = 0
    return float(np.count_nonzero(patch)) / patch.size
