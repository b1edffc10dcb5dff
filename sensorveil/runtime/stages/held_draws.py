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


class HeldDraws(object):
    """One substitute per key for as long as the key keeps coming back. ``following``: bank position ->
    the position of the same bank person's next crop (None: the substitute stays the one drawn);
    the held substitute moves on to it every ``frames_per_step`` calls (the bank's crops were taken
    every that many frames). A key whose known value was unknown (-1) at its draw draws again once it
    is known, so a conditioned bundle's substitute walks the way the tracker measured: at most two
    draws per person."""

    def __init__(self, following=None, frames_per_step=1, forget_after=FORGET_AFTER):
        self.following = following
        self.frames_per_step = max(int(frames_per_step), 1)
        self.forget_after = int(forget_after)
        self.entries = {}      # key -> [bank position, known value at the draw, calls held, last call seen]
        self.calls = 0

    def needs_draw(self, keys, known=None) -> np.ndarray:
        """bool, one per key: whether the next call takes that key's fresh draw (a key not held, or held since
        before its known value was known). Every other key's draw would be thrown away, so its model output
        need not be computed. Read before the call, changing nothing: a key twice in one call is marked
        twice though its second row finds the first's entry (a draw too many, never one too few)."""
        return np.array([self.redraws(self.entries.get(key), -1 if known is None else int(known[k]))
                         for k, key in enumerate(keys)], dtype=bool).reshape(-1)

    @staticmethod
    def redraws(entry, value) -> bool:
        return entry is None or entry[1] < 0 <= value

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
                entry = self.entries[key] = [int(drawn[k]), value, 0, self.calls]
            else:
                entry[2] += 1
                entry[3] = self.calls
                if self.following is not None and entry[2] % self.frames_per_step == 0:
                    entry[0] = int(self.following[entry[0]])
            positions[k] = entry[0]
        for key in [key for key, entry in self.entries.items() if self.calls - entry[3] > self.forget_after]:
            del self.entries[key]
        return positions
