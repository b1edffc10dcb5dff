"""Keys hold PASS's draw: a camera tracker's person keeps one substitute for as long as it is tracked,
instead of a new draw every frame, which would flicker between strangers and show an observer many draws
of P(X'|X) for the same person instead of one (sensorveil.runtime.stages.substitution draws; this module
only remembers).

numpy only, Python 3.6.
"""
import numpy as np

from sensorveil.runtime.errors import OutputError

# calls a key may be absent before its held substitute is forgotten: longer than a tracker keeps a lost
# person (camera.Tracker's max_missed, 5 frames), so a person it bridges keeps their substitute
FORGET_AFTER = 30
# consecutive calls a key's known value must differ from the one its draw was made on before it is drawn again on
# the new value: a person who turns, or a track the tracker moved onto someone walking the other way. Held on the
# first known direction alone, walkway's substitutes walked the way their people walk on 66% of boxes
# (docs/camera_audit-walkway.md, "direction"); a single frame's jitter does not redraw
TURN_CONFIRM = 3


class HeldDraws(object):
    """One substitute per key for as long as the key keeps coming back. ``following``: bank position ->
    the position of the same bank person's next crop (None: the substitute stays the one drawn);
    the held substitute moves on to it every ``frames_per_step`` calls (the bank's crops were taken
    every that many frames). A key whose known value was unknown (-1) at its draw draws again once it
    is known, and again when a known value other than its draw's holds for ``turn_confirm`` calls in a row, so a
    conditioned bundle's substitute walks the way the tracker measures: a draw per person and one more per
    turn (each an observer sees; the identity audit scores every released crop as a draw of its own)."""

    def __init__(self, following=None, frames_per_step=1, forget_after=FORGET_AFTER, turn_confirm=TURN_CONFIRM):
        self.following = following
        self.frames_per_step = max(int(frames_per_step), 1)
        self.forget_after = int(forget_after)
        self.turn_confirm = max(int(turn_confirm), 1)
        # key -> [bank position, known value at the draw, calls held, last call seen, calls in a row turned]
        self.entries = {}
        self.calls = 0

    def needs_draw(self, keys, known=None) -> np.ndarray:
        """bool, one per key: whether the next call takes that key's fresh draw (a key not held, or held since
        before its known value was known). Every other key's draw would be thrown away, so its model output
        need not be computed. Read before the call, changing nothing: a key twice in one call is marked
        twice though its second row finds the first's entry (a draw too many, never one too few)."""
        return np.array([self.redraws(self.entries.get(key), -1 if known is None else int(known[k]))
                         for k, key in enumerate(keys)], dtype=bool).reshape(-1)

    def redraws(self, entry, value) -> bool:
        """Whether a key held as ``entry`` takes a fresh draw at this call's known ``value``: not held, held since
        before a value was known, or turned to another known value for ``turn_confirm`` calls with this one."""
        if entry is None or entry[1] < 0 <= value:
            return True
        return 0 <= value != entry[1] and entry[4] + 1 >= self.turn_confirm

    def __call__(self, drawn, keys, known=None):
        """``drawn``: this call's fresh draws, one per key (negative where ``needs_draw`` said none was
        needed); returns the positions to emit."""
        self.calls += 1
        positions = np.empty_like(drawn)
        for k, key in enumerate(keys):
            value = -1 if known is None else int(known[k])
            entry = self.entries.get(key)
            if self.redraws(entry, value):
                if drawn[k] < 0:     # a draw the model was not run for: never emit a made-up substitute
                    raise OutputError("substitution: person {!r} needs a fresh draw but none was made; expected "
                                      "a draw for every key needs_draw marks, so nothing is released".format(key))
                entry = self.entries[key] = [int(drawn[k]), value, 0, self.calls, 0]
            else:
                entry[2] += 1
                entry[3] = self.calls
                entry[4] = entry[4] + 1 if 0 <= value != entry[1] else 0
                if self.following is not None and entry[2] % self.frames_per_step == 0:
                    entry[0] = int(self.following[entry[0]])
            positions[k] = entry[0]
        for key in [key for key, entry in self.entries.items() if self.calls - entry[3] > self.forget_after]:
            del self.entries[key]
        return positions
