"""The leak meter: does a released camera frame still show a person the pipeline did not privatize?

An offline detector finds the people in each RAW frame, independently of the pipeline and with more to go
on than it has: the clip's temporal median as the empty scene (people who pass are not in it), the pixels
that differ from it, person-sized blobs of them. For each such box the pipeline did not cover with one of its
own (its substitute is the mechanism's output, which the audit measures), the meter looks at the person's own
pixels (raw differs from the empty scene by more than PERSON_DIFF) and their outline, and asks how much of the
raw person's detail the release keeps (``person_share``): fitted as share x raw + b x empty scene + c, a ghost
blended at 0.3 reads 0.3, the empty scene or a neutral grey 0, a scene brighter, darker or blockier than the
clip's median about 0, the raw frame 1. A box leaks when it keeps GHOST_SHARE or more (docs/decisions/0007).
The meter states its power on every run: how many judged boxes a control ghost (CONTROL_GHOST of the raw
frame blended into the release) is caught in. Pixels the pipeline pasted a substitute or a perturbed crop on
(its windows) are left out of that judgment: they are the mechanism's output, which the audit measures, not
the camera's frame. ``offline`` adds a second offline detector's boxes (the clip audit, clip_audit.py, passes the
bundle's learned detector run on the frame and on overlapping tiles at a low score, ``TiledPeople``), so people
the pipeline's own detectors miss are looked for at a higher resolution than the pipeline runs. A person who
stands through the whole clip is in the median too: their pixels do not differ from the empty scene, so such a
box is counted as found but cannot be judged (``measured_boxes`` says how many could).

A box that reads GHOST_SHARE or more is not a leak when every pixel the meter judged there still holds a value the
release took while nobody was near that pixel in the raw frame (``HeldSinceEmpty``): that value was made before the
person now there came, so it cannot show them; the fit read the scene's old picture of the place. Such boxes are
counted apart (``held_boxes``, listed like leaks), never hidden (docs/decisions/0033-held-since-empty.md).
"""
import numpy as np

# the offline detectors the meter looks with (re-exported: callers read them from here too)
from sensorveil.benchmarks.reference_people import (  # noqa: F401
    MEDIAN_EVERY,
    PERSON_DIFF,
    TiledPeople,
    empty_scene,
    merge_boxes,
    offline_boxes,
    to_grey,
)

MIN_PERSON_PIXELS = 20    # a box with fewer person pixels says nothing either way
MIN_PATTERN = 2.0         # grey levels (std) of detail the person must have beyond the empty scene's
GHOST_SHARE = 0.1         # a release keeping a tenth of the person leaks; the pages print the largest share read
CONTROL_GHOST = 0.2       # the ghost blended in to measure the meter's power on the clip's own boxes
CONTEXT = 0.25            # share of a box's size searched around it for the person's pixels
DETAIL_SIGMA = 1.5        # px, the blur ``detail`` takes away: what is left is the person's texture and outline
RING = 2                  # px around the person's pixels judged too: a flat-coloured person shows as an outline
BLUR_REACH = 4            # px a pasted pixel's detail spreads under the blur (about 2.5 DETAIL_SIGMA)
KEPT_LEAKS = 100          # leaking boxes listed one by one (frame, box, share) for a person to look at
HELD_REACH = BLUR_REACH   # px around a raw person's pixel within which a value the release takes may be theirs


def detail(grey):
    """The image less its blur: a person's texture and outline stay, light levels and block edges mostly go."""
    import cv2
    grey = np.asarray(grey, np.float32)
    return grey - cv2.GaussianBlur(grey, (0, 0), DETAIL_SIGMA)


def near(mask, reach: int):
    """The mask grown by ``reach`` pixels each way."""
    import cv2
    kernel = np.ones((2 * reach + 1, 2 * reach + 1), np.uint8)
    return cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)


def differs_from_empty(raw_grey, empty):
    """Where the raw frame differs from the empty scene by more than PERSON_DIFF: the meter's test of a person's
    pixel, for the box it judges and for the history of what the release showed (``HeldSinceEmpty``)."""
    return np.abs(np.asarray(raw_grey, np.float64) - empty) > PERSON_DIFF


def person_pixels(raw_grey, empty, box, pasted=None) -> tuple:
    """(rows, cols, person, judged) of ``box`` grown by CONTEXT: the slices, the person's pixels (raw differs from
    the empty scene by more than PERSON_DIFF) among the judged ones (not within BLUR_REACH of a pasted pixel)."""
    x, y, w, h = (int(v) for v in box)
    grow_x, grow_y = max(int(CONTEXT * w), 2), max(int(CONTEXT * h), 2)     # a box cuts limbs off
    rows = slice(max(y - grow_y, 0), y + h + grow_y)
    cols = slice(max(x - grow_x, 0), x + w + grow_x)
    judged = np.ones(raw_grey[rows, cols].shape, bool) if pasted is None else ~near(pasted[rows, cols], BLUR_REACH)
    person = differs_from_empty(raw_grey[rows, cols], empty[rows, cols]) & judged
    return rows, cols, person, judged


def person_share(raw_grey, released_grey, empty, box, pasted=None) -> "float | None":
    """How much of the raw person the released pixels keep: the raw frame's coefficient when the release's
    detail is fitted as share x raw + b x empty + c, in ``detail`` (least squares over the person's pixels, where
    raw differs from the empty scene by more than PERSON_DIFF in the box grown by CONTEXT, and a RING around
    them; pasted pixels left out). Fitting b and c and fitting detail mean a scene that differs from the clip's
    median by a gain, an offset or neutral blocks reads about 0 instead of tying with the raw frame. Pixels
    within BLUR_REACH of a pasted one are left out too: the blur carries the paste's detail that far. None: too
    few person pixels to judge, or a person with no detail beyond an affine copy of the empty scene's."""
    region = fitted_pixels(raw_grey, empty, box, pasted)
    return None if region is None else share_over(region, raw_grey, released_grey, empty)


def fitted_pixels(raw_grey, empty, box, pasted=None) -> "tuple | None":
    """(rows, cols, pixels): the region of ``box`` and the pixels ``person_share`` fits there (the person's and a
    RING around them, pasted left out); None where fewer than MIN_PERSON_PIXELS are the person's."""
    rows, cols, person, judged = person_pixels(raw_grey, empty, box, pasted)
    if person.sum() < MIN_PERSON_PIXELS:
        return None
    return rows, cols, near(person, RING) & judged


def share_over(region, raw_grey, released_grey, empty) -> "float | None":
    """``person_share`` over a region ``fitted_pixels`` chose."""
    rows, cols, person = region
    r, x_raw, e = (detail(a[rows, cols])[person].astype(np.float64) for a in (released_grey, raw_grey, empty))
    basis = np.stack([e, np.ones(e.size)], 1)
    # Frisch-Waugh: the raw person's own pattern is what the empty scene and a constant cannot explain. Only the
    # person and their outline: further out the quiet scene follows the camera (a shadow, a lighting change)
    # and would read as the person's pattern.
    pattern = x_raw - basis @ np.linalg.lstsq(basis, x_raw, rcond=None)[0]
    if pattern.std() < MIN_PATTERN:
        return None
    return float(pattern @ r / (pattern @ pattern))


class HeldSinceEmpty(object):
    """Per pixel, the value the release last took there while nobody was near that pixel in the raw frame (no raw
    pixel within HELD_REACH differed from the empty scene by more than PERSON_DIFF), and whether the release shows
    that value now: a value taken before a person came, held (or shown again once a paste over it has passed).

    ``follow(index, raw_grey, released)`` on every frame from the stream's first (index 0: its release is made from
    that frame alone). A pixel whose value changes while nobody is near takes the new value as its own; one that
    changes while someone is near keeps the old. A frame not followed (a gap, or a first frame past 0) forgets
    every pixel's value: a value may have been taken in a frame the meter never saw. Why it holds: each pixel can
    only show its one remembered value or not, and the release first showed that value at a frame when nobody was
    near it, so a region that shows all of them is a picture the release had already shown of the empty place.
    What it cannot tell: a value shown first while nobody was near may still carry an earlier frame (a scene that
    kept a person who stood there, shown again once a paste over it has passed); if that person comes back, the
    box is set apart. That leak is read while it forms, with the person there and the values taken near them.

    ``fixed(shape)``: a picture the release may show that holds nothing of any frame (the runtime's neutral grain,
    made from a fixed seed); a pixel showing its value there is as good as one showing a value taken while
    nobody was near. An operator's scene still is not passed: it is a picture of the place at some time."""

    def __init__(self, empty, fixed=None):
        self.empty, self.fixed = empty, fixed
        self.index = self.value = self.remembered = self.known = self.fixed_picture = None

    def follow(self, index, raw_grey, released):
        released = np.asarray(released)
        nobody_near = ~near(differs_from_empty(raw_grey, self.empty), HELD_REACH)
        if self.value is None or index != self.index + 1 or released.shape != self.value.shape:
            self.remembered = released.copy()
            self.known = nobody_near if index == 0 else np.zeros(nobody_near.shape, bool)
            self.fixed_picture = None if self.fixed is None else self.fixed(released.shape)
        else:
            taken = any_channel(released != self.value) & nobody_near
            self.remembered[taken] = released[taken]
            self.known |= taken
        self.index, self.value = index, released.copy()

    def held(self, index, rows, cols, pixels) -> bool:
        """Whether every one of ``pixels`` (a mask over the region rows x cols) shows its remembered value at
        frame ``index``."""
        if self.index != index:
            return False
        shown = self.value[rows, cols]
        ok = ~any_channel(shown != self.remembered[rows, cols]) & self.known[rows, cols]
        if self.fixed_picture is not None:
            ok |= ~any_channel(shown != self.fixed_picture[rows, cols])
        return bool(ok[pixels].all())


def any_channel(differs):
    return differs.any(2) if differs.ndim == 3 else differs


def pasted_mask(shape, windows):
    """The pixels inside the pipeline's crop windows (x0, y0, x1, y1), clipped to the frame."""
    mask = np.zeros(shape[:2], bool)
    for x0, y0, x1, y1 in np.asarray(windows, dtype=np.int64).reshape(-1, 4):
        mask[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = True
    return mask


class LeakMeter(object):
    """``add(index, raw, released, pipeline_boxes, pipeline_windows)`` per frame, then ``figures()``."""

    def __init__(self, empty, offline=None, fixed=None):
        """``empty``: the grey empty scene; ``offline(index, raw)``: more boxes of people (a made scene's truth,
        or ``TiledPeople`` on the raw frame); ``fixed(shape)``: a picture of no frame the release may show
        (``HeldSinceEmpty``)."""
        self.empty, self.offline = empty, offline
        self.boxes = self.unprivatized = self.leaking = self.measured = self.control_caught = 0
        self.largest_share = None
        self.worst = {"frame": None, "leaking": 0, "boxes": []}
        self.leaks = []       # the first KEPT_LEAKS leaking boxes, each with its frame and share: to inspect
        # boxes at GHOST_SHARE or more whose judged pixels all hold values from before them: counted, the first
        # KEPT_LEAKS listed
        self.held_boxes, self.held_readings = 0, []
        self.history = HeldSinceEmpty(empty, fixed)

    def follow(self, index, raw, released):
        """The release's history, on every frame (``add`` follows the frames it judges itself): a frame not
        followed leaves every pixel's history unknown, and then no box is set apart as held."""
        self.history.follow(index, to_grey(raw), released)

    def held_from_before(self, index, region) -> bool:
        """Whether every released pixel the fit read (the fitted pixels and the blur's reach around them, all in the
        region) holds a value taken while nobody was near it."""
        rows, cols, pixels = region
        return self.history.held(index, rows, cols, near(pixels, BLUR_REACH))

    def people(self, index, raw):
        """Every person the offline detectors find in the raw frame (``offline(index, raw)`` adds its boxes)."""
        found = offline_boxes(raw, self.empty)
        return found if self.offline is None else merge_boxes(found, self.offline(index, raw))

    def add(self, index, raw, released, pipeline_boxes, pipeline_windows=None):
        from sensorveil.runtime.camera import iou
        found = self.people(index, raw)
        self.boxes += len(found)
        if len(found) and len(pipeline_boxes):
            found = found[iou(found, pipeline_boxes).max(1) < 0.3]
        self.unprivatized += len(found)
        raw_grey, released_grey = to_grey(raw), to_grey(released)
        pasted = None if pipeline_windows is None else pasted_mask(raw.shape, pipeline_windows)
        if self.history.index != index:
            self.history.follow(index, raw_grey, released)
        # the control: the same release with CONTROL_GHOST of the raw frame blended in, which must read as a leak.
        # It is made in this frame, so none of its person's pixels is held from before: never set apart as held
        control = CONTROL_GHOST * raw_grey + (1 - CONTROL_GHOST) * released_grey
        leaking = []
        for box in found:
            region = fitted_pixels(raw_grey, self.empty, box, pasted)
            share = None if region is None else share_over(region, raw_grey, released_grey, self.empty)
            if share is None:
                continue
            self.measured += 1
            self.largest_share = share if self.largest_share is None else max(self.largest_share, share)
            self.control_caught += share_over(region, raw_grey, control, self.empty) >= GHOST_SHARE
            if share < GHOST_SHARE:
                continue
            reading = {"frame": int(index), "box": box.tolist(), "share": round(share, 3)}
            if self.held_from_before(index, region):
                self.held_boxes += 1
                if len(self.held_readings) < KEPT_LEAKS:
                    self.held_readings.append(reading)
                continue
            leaking.append(box.tolist())
            if len(self.leaks) < KEPT_LEAKS:
                self.leaks.append(reading)
        self.leaking += len(leaking)
        if len(leaking) > self.worst["leaking"]:
            self.worst = {"frame": int(index), "leaking": len(leaking), "boxes": leaking}

    def figures(self) -> dict:
        return {"offline_boxes": self.boxes, "not_privatized_boxes": self.unprivatized,
                "measured_boxes": self.measured, "leaking_boxes": self.leaking,
                "leaking_share": self.leaking / self.boxes if self.boxes else 0.0, "worst_frame": self.worst,
                "leaks": self.leaks,
                "held_boxes": self.held_boxes, "held": self.held_readings,
                "rule": {"ghost_share": GHOST_SHARE, "control_ghost": CONTROL_GHOST},
                "largest_share": self.largest_share,
                "control_caught_boxes": int(self.control_caught),
                "offline_detectors": "difference from the empty scene" + (
                    "" if self.offline is None else " + " + getattr(self.offline, "label", "more boxes"))}
