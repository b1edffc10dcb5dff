"""When each block of a cut-out release's quiet scene began showing the camera, to tell a downstream
counter's "person" outside every privatized window from a change of the scene itself.

A cut-out release shows the camera only in blocks where nobody was seen for a horizon of frames
(sensorveil/runtime/camera/scene.py); until then a block is neutral grey. When a block starts showing the
camera, the grey gives way to the place at once, and a background-model counter reads that block as
something new in the scene: a person, when the revealed blocks stand upright. scripts/reveal_rules.py
counts how many of the counter's people outside the windows lie over such a block.
"""
import numpy as np

# frames after a block starts showing the camera during which a counter's find over it is put down to the reveal
REVEAL_RECENT = 30


class RevealClock(object):
    """``note(scene, frame)`` after each frame (the pipeline's QuietScene, or None for a release without one);
    ``over_recent(boxes, frame)`` -> how many boxes (x, y, w, h) lie over a block revealed in the last
    ``within`` frames, or None when there is no quiet scene (a window release shows the raw frame around
    its windows: nothing is revealed)."""

    def __init__(self, within=REVEAL_RECENT):
        self.within = int(within)
        self.revealed_at = None     # frame each block began showing the camera; -inf while it has not
        self.shown = None
        self.block = None

    def note(self, scene, frame):
        if scene is None:
            return
        if self.revealed_at is None:
            self.revealed_at = np.full(scene.shown.shape, -np.inf)
            self.shown = np.zeros(scene.shown.shape, dtype=bool)
            self.block = int(scene.block)
        self.revealed_at[scene.shown & ~self.shown] = frame
        self.shown = scene.shown.copy()

    def over_recent(self, boxes, frame):
        if self.revealed_at is None:
            return None
        block, count = self.block, 0
        for x, y, w, h in np.asarray(boxes, dtype=np.int64).reshape(-1, 4):
            under = self.revealed_at[max(y, 0) // block:max(y + h - 1, 0) // block + 1,
                                     max(x, 0) // block:max(x + w - 1, 0) // block + 1]
            count += int(under.size > 0 and frame - under.max() <= self.within)
        return count
