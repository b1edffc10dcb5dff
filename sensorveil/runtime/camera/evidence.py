"""Which of the people found get a substitute: a track the learned graph has found whole at least once, or one that
moves. A blob only the motion detector finds, that no learned graph ever called a person and that has stood still
for ``STILL_FRAMES`` frames, is kept busy and out of the background model as before (so nothing of it is released),
but no substitute is pasted for it.

Why: on Intel's one-by-one clip such blobs are the motion detector's, not people's: the walls and floor where a
person stood flicker once they leave (the camera's exposure follows a near person), and a walked-in blob on the
floor stayed protected for seconds (docs/decisions/0028-substitutes-need-a-person.md). Each got a walker pasted, so
the release showed people where nobody was. A real person the graph never finds who stands still loses their
substitute the same way: they are left out of the count, never released (the place stays busy).
Runs on the boards' own Python (3.6): no annotations import, no f-strings.
"""
import numpy as np

from sensorveil.runtime.camera.hold import STILL_REACH, moved

# frames an unconfirmed track may stand (within STILL_REACH of where it stopped) and keep its substitute: a walker
# moves out of reach within a few frames; a flicker where someone stood never does
STILL_FRAMES = 10


class PersonEvidence(object):
    """``paste(ids, boxes, whole, live)`` -> bool per box: whether it gets a substitute. ``whole``: bool per box, the
    learned graph found it (None: the pipeline has no learned graph, so there is no evidence to ask for and every
    box is pasted); ``live``: the tracker's live track ids (the others are forgotten)."""

    def __init__(self, still_frames=STILL_FRAMES):
        self.still_frames = int(still_frames)
        self.confirmed = set()  # track ids the learned graph has found whole
        self.anchor = {}        # track id -> its box where its current run of still frames began
        self.still = {}         # track id -> frames since then within STILL_REACH

    def paste(self, ids, boxes, whole, live):
        boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
        if whole is None:
            return np.ones(len(boxes), dtype=bool)
        keep = np.zeros(len(boxes), dtype=bool)
        for row, (track, box, is_whole) in enumerate(zip(ids, boxes, whole)):
            track = int(track)
            if is_whole:
                self.confirmed.add(track)
            anchor = self.anchor.get(track)
            if anchor is None or moved(anchor, box) > STILL_REACH:
                self.anchor[track], self.still[track] = box, 0
            else:
                self.still[track] += 1
            keep[row] = track in self.confirmed or self.still[track] < self.still_frames
        for gone in set(self.anchor) - set(int(track) for track in live):
            self.anchor.pop(gone)
            self.still.pop(gone)
            self.confirmed.discard(gone)
        return keep
