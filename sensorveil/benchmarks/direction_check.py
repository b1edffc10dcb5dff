"""The walking direction a conditioned camera release delivers on the device, against the way each person walks.

A PASS bundle conditioned on direction draws each person's substitute among bank people walking the way the
tracker measured (runtime.camera.track.WalkingDirection: the slope of the box centre over the last frames only)
and holds that draw for the person (runtime.stages.held_draws.HeldDraws: drawn again when a direction first
becomes known, and when the person turns for a few frames). The attribute audit's probe of the release reads
back the label each row was drawn on, so it says nothing of this. Here, on every frame of the clip:

* delivered: the direction the release's substitute walks for each box: the value the runtime's HeldDraws, fed
  the tracker's directions frame by frame, last drew it on, or unknown (a draw from the whole bank: either way);
* walked: the direction the person walks around that frame, by the training labels' rule
  (sdk.datasets.walkway): the slope of the same track's box centre over its boxes within +-WINDOW frames,
  left out where slower than MIN_SPEED px/frame.

The figure: the share of boxes with a walked direction whose substitute was drawn on that direction, its 95%
interval by a bootstrap over people (a person's boxes agree or disagree together), and beside it the share drawn
before the direction was known.
"""
import numpy as np

WINDOW = 10          # frames either side: the training labels' +-5 crops at their stride 2
MIN_SPEED = 0.3      # px/frame: the labels' and the tracker's own threshold
BOOTSTRAP = 1000


class DirectionCheck(object):
    """``add(index, tracks, boxes, directions)`` per frame, as the pipeline found them; ``figures()`` after."""

    def __init__(self, window=WINDOW, min_speed=MIN_SPEED):
        self.window, self.min_speed = int(window), float(min_speed)
        self.rows = []       # (frame index, track id, box centre x, the tracker's direction then)

    def add(self, index, tracks, boxes, directions) -> None:
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        for track, box, direction in zip(tracks, boxes, directions):
            self.rows.append((int(index), int(track), box[0] + box[2] / 2.0, int(direction)))

    def delivered(self, rows) -> tuple:
        """(the known value each row's substitute was drawn on, the fresh draws made): the runtime's own HeldDraws
        fed the frames in order, keyed by track with the tracker's direction, as the substitution stage feeds it
        (-1: drawn unknown). Each fresh draw is one more sample of P(X'|X) an observer sees."""
        from sensorveil.runtime.stages.held_draws import HeldDraws
        held, out, draws = HeldDraws(), np.full(len(rows), -1, dtype=np.int64), 0
        for frame in np.unique(rows[:, 0]):
            here = np.flatnonzero(rows[:, 0] == frame)
            keys, known = rows[here, 1].astype(np.int64).tolist(), rows[here, 3].astype(np.int64)
            draws += int(held.needs_draw(keys, known).sum())
            held(np.arange(len(here)), keys, known=known)
            out[here] = [held.entries[key][1] for key in keys]
        return out, draws

    def labelled(self):
        """(track, walked, delivered) per box with a walked direction: arrays of ints (delivered -1: unknown)."""
        rows = np.asarray(self.rows, dtype=np.float64).reshape(-1, 4)
        (delivered, self.draws), out = self.delivered(rows), []
        for track in np.unique(rows[:, 1]):
            mine = np.flatnonzero(rows[:, 1] == track)
            for k in mine:
                near = mine[np.abs(rows[mine, 0] - rows[k, 0]) <= self.window]
                if len(near) < 2 or np.ptp(rows[near, 0]) == 0:
                    continue
                speed = np.polyfit(rows[near, 0], rows[near, 2], 1)[0]
                if abs(speed) >= self.min_speed:
                    out.append((int(track), int(speed > 0), int(delivered[k])))
        return np.asarray(out, dtype=np.int64).reshape(-1, 3)

    def figures(self, conditioned_on=None, seed=0) -> dict:
        rows = self.labelled()
        tracks, walked, delivered = rows.T if len(rows) else (np.zeros(0, np.int64),) * 3
        agree = (delivered == walked).astype(np.float64)
        people = np.unique(tracks)
        share = float(agree.mean()) if len(agree) else None
        rng, means = np.random.default_rng(seed), []
        by_person = [agree[tracks == person] for person in people]
        for _ in range(BOOTSTRAP if len(people) > 1 else 0):
            picked = [by_person[k] for k in rng.integers(0, len(people), len(people))]
            means.append(np.concatenate(picked).mean())
        interval = [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))] if means else [0.0, 1.0]
        tracked = len(np.unique(np.asarray(self.rows, dtype=np.int64).reshape(-1, 4)[:, 1]))
        return {"conditioned_on": conditioned_on, "boxes": int(len(rows)), "people": int(len(people)),
                "drawn_on_walked": share, "interval": interval,
                "draws_per_tracked_person": self.draws / tracked if tracked else None,
                "drawn_unknown": float((delivered < 0).mean()) if len(rows) else None,
                "rule": f"walked: the track's centre slope over +-{self.window} frames, from {self.min_speed} px/frame"}


def format_direction(figures: dict) -> str:
    """One terminal line: how often the device's draw walks the way the person walks."""
    if figures.get("conditioned_on") != "direction":
        return "  direction  not measured: this bundle's draw is not conditioned on the walking direction"
    if not figures["boxes"]:
        return "  direction  not measured: no box of a walking person"
    low, high = figures["interval"]
    return (f"  direction  on the device, {figures['drawn_on_walked']:.1%} [{low:.1%}, {high:.1%}] of "
            f"{figures['boxes']:,} boxes of {figures['people']} walking people get a substitute drawn on the way "
            f"they walk; {figures['drawn_unknown']:.1%} were drawn before the tracker knew (either way)"
            + draws_text(figures.get("draws_per_tracked_person")))


def draws_text(draws) -> str:
    """The fresh draws per tracked person, where the audit recorded them (pages from before it did not)."""
    return "" if draws is None else f"; {draws:.2f} draws per tracked person"
