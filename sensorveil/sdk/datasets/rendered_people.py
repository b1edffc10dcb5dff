"""Walkers the SDK draws itself: the default substitute bank of camera bundles, so a release never shows a
real person.

Each walker is a person drawn from a handful of shapes (head, neck, torso, two arms, two legs, shoes) whose
proportions, build, clothing and hair colours are drawn at random, posed along a walking cycle (thighs and
arms swinging in opposite phase, the knee bending in the swing), seen from the side or turned part way
towards the camera (a camera above a path sees most walkers at a slant: the body's breadth shows, the hips and
shoulders are apart across the image, and the limbs swing partly towards the camera). Nothing of any real
person goes in: no face, no texture, no photograph; clothing is flat colour shaded for volume (lit from above
and from one side), with a camera's grain. scripts/substitute_detection.py measures how often an independent
person detector finds them pasted into a real clip (docs/substitute_detection.md). Every walker
is drawn facing left and, mirrored, facing right (the camera dataset's ``direction``), at ``phases`` points of
its cycle, so a bank sequence (the runtime's held substitute walking on) steps through one cycle.

Drawn at twice the crop's size and area-resampled, so edges are soft as a camera's are; the person's mask is
where the resampled coverage is at least a half. numpy and OpenCV only.
"""
from __future__ import annotations

import math

import numpy as np

GENERATOR = "sensorveil rendered walkers v4"
SUPERSAMPLE = 2
# a camera's pixels are never flat: grain on the person, as a sensor and cloth give it (standard deviation, grey
# levels); a flat-coloured figure reads as a drawing to a detector (scripts/substitute_detection.py)
GRAIN = 10.0

# skin, hair and clothing colours, BGR; clothing is drawn in HSV for an even spread of hues
SKIN_TONES = ((205, 224, 255), (164, 195, 234), (125, 165, 210), (92, 130, 180), (60, 95, 141), (40, 65, 101))
# dark hair only (black, dark and mid brown): a camera above a path sees mostly the top of the head, and the
# COCO detector found walkers with blond, grey or red hair less often in probes (decision 0019; v3 drew those too;
# v4's figures as a whole: docs/substitute_detection.md)
HAIR_COLOURS = ((20, 20, 25), (30, 45, 70), (45, 75, 120))
# the near arm's shade of the top: a shade darker than the torso it swings across, so it reads as an arm
NEAR_ARM = 0.8


def _hsv_colour(rng: np.random.Generator, value: tuple, saturation: tuple) -> tuple:
    import cv2
    hsv = np.array([[[rng.integers(0, 180), rng.uniform(*saturation) * 255, rng.uniform(*value) * 255]]], np.uint8)
    return tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0])


def random_walker(rng: np.random.Generator) -> dict:
    """One walker's body and clothing: sizes as shares of the person's height, colours in BGR."""
    return {
        "height": rng.uniform(0.70, 0.80),        # of the crop's height (a box grown by CROP_MARGIN a side)
        "head": rng.uniform(0.064, 0.076),        # head radius
        # widths: v3's (torso 0.14-0.19, shoulders 0.22-0.27, thigh 0.065-0.080) read as a block to the detector
        # once pasted and thickened by a pixel (composite.THICKEN); v4 is a fifth slimmer
        "torso_depth": rng.uniform(0.112, 0.152),  # front to back, seen from the side
        "shoulders": rng.uniform(0.176, 0.216),    # shoulder breadth, seen from the front
        "limb": rng.uniform(0.055, 0.068),         # thickness of a thigh; a shin is 0.85 of it, an arm 0.75
        "leg": rng.uniform(0.45, 0.50),           # hip to sole
        "stride": rng.uniform(14.0, 24.0),        # thigh swing, degrees either side
        "arm_swing": rng.uniform(12.0, 28.0),
        "lean": rng.uniform(0.0, 5.0),            # forward lean of the torso, degrees
        # how far the walker is turned towards (or away from) the camera, degrees from a side view: a camera
        # above a path sees most walkers at a slant
        "turn": rng.uniform(0.0, 60.0),
        "skin": SKIN_TONES[rng.integers(len(SKIN_TONES))],
        "hair": HAIR_COLOURS[rng.integers(len(HAIR_COLOURS))],
        "top": _hsv_colour(rng, (0.25, 0.95), (0.0, 0.9)),
        "bottom": _hsv_colour(rng, (0.12, 0.70), (0.0, 0.6)),
        "shoes": _hsv_colour(rng, (0.05, 0.35), (0.0, 0.3)),
        "long_sleeves": bool(rng.random() < 0.6),
        "skirt": bool(rng.random() < 0.15),
        "bag": bool(rng.random() < 0.25),
        "bag_colour": _hsv_colour(rng, (0.1, 0.6), (0.0, 0.7)),
    }


def _limb(canvas, mask, start, angle_deg, length, thickness, colour, squash=1.0):
    """A segment from ``start`` at ``angle_deg`` from straight down (positive swings forward, +x), its sideways
    reach times ``squash`` (a walker turned towards the camera swings its limbs partly towards it), drawn with
    round ends; returns its far end."""
    import cv2
    end = (start[0] + squash * length * math.sin(math.radians(angle_deg)),
           start[1] + length * math.cos(math.radians(angle_deg)))
    a = tuple(int(round(v)) for v in start)
    b = tuple(int(round(v)) for v in end)
    width = max(int(round(thickness)), 1)
    cv2.line(canvas, a, b, colour, width, cv2.LINE_AA)
    cv2.line(mask, a, b, 255, width, cv2.LINE_AA)
    return end


def _fill(canvas, mask, points, colour):
    import cv2
    poly = np.round(np.asarray(points)).astype(np.int32)
    cv2.fillConvexPoly(canvas, poly, colour, cv2.LINE_AA)
    cv2.fillConvexPoly(mask, poly, 255, cv2.LINE_AA)


def _ellipse(canvas, mask, centre, axes, colour):
    import cv2
    c = tuple(int(round(v)) for v in centre)
    ax = tuple(max(int(round(v)), 1) for v in axes)
    cv2.ellipse(canvas, c, ax, 0, 0, 360, colour, -1, cv2.LINE_AA)
    cv2.ellipse(mask, c, ax, 0, 0, 360, 255, -1, cv2.LINE_AA)


def _darker(colour, share=0.7):
    return tuple(int(c * share) for c in colour)


def _legs(canvas, mask, walker, hip, phase, person, view):
    """Both legs and shoes, the far one first and darker; a turned walker's hips are apart across the image."""
    swing, (cos_t, sin_t) = math.sin(2 * math.pi * phase), view
    leg, limb = walker["leg"] * person, walker["limb"] * person
    for side in (-1, 1):
        colour = walker["bottom"] if side > 0 else _darker(walker["bottom"])
        shoe = walker["shoes"] if side > 0 else _darker(walker["shoes"])
        start = (hip[0] - side * 0.045 * person * sin_t, hip[1])
        thigh_angle = side * walker["stride"] * swing
        # the knee bends most as the leg swings forward through the middle of its swing
        knee_bend = 10.0 + 35.0 * max(0.0, math.cos(2 * math.pi * phase + (0 if side > 0 else math.pi)))
        knee = _limb(canvas, mask, start, thigh_angle, leg * 0.5, limb, colour, cos_t)
        ankle = _limb(canvas, mask, knee, thigh_angle - knee_bend, leg * 0.5, limb * 0.85, colour, cos_t)
        _ellipse(canvas, mask, (ankle[0] + limb * 0.5 * cos_t, ankle[1]), (limb * (0.5 + 0.45 * cos_t), limb * 0.4),
                 shoe)


def _arm(canvas, mask, walker, shoulder, angle, person, colour, squash):
    arm = 0.75 * walker["limb"] * person
    sleeve = colour if walker["long_sleeves"] else walker["skin"]
    elbow = _limb(canvas, mask, shoulder, angle, person * 0.17, arm * 1.1, colour, squash)
    _limb(canvas, mask, elbow, angle + 15.0, person * 0.16, arm, sleeve, squash)


def draw_walker(walker: dict, phase: float, crop_shape=(128, 64)) -> tuple:
    """(colour BGR uint8 (H, W, 3) on black, coverage (H, W) float 0-1) of ``walker`` facing right (+x) at
    ``phase`` (0-1) of its walking cycle, centred in a crop of ``crop_shape`` at twice its size."""
    h, w = crop_shape[0] * SUPERSAMPLE, crop_shape[1] * SUPERSAMPLE
    canvas, mask = np.zeros((h, w, 3), np.uint8), np.zeros((h, w), np.uint8)
    person = walker["height"] * h
    top, cx = (h - person) / 2.0, w / 2.0
    swing = math.sin(2 * math.pi * phase)
    view = (math.cos(math.radians(walker["turn"])), math.sin(math.radians(walker["turn"])))
    leg, limb = walker["leg"] * person, walker["limb"] * person
    hip = (cx, top + person - leg)
    shoulder_y = top + 2.2 * walker["head"] * person
    # seen width of the body: its depth from the side, its breadth from the front, and a turned walker between
    depth = walker["torso_depth"] * person * view[0] + walker["shoulders"] * person * view[1]
    waist = depth * (0.85 if view[1] > 0.3 else 1.0)
    lean = math.tan(math.radians(walker["lean"])) * (hip[1] - shoulder_y)
    shoulder = (cx + lean, shoulder_y)
    reach = walker["shoulders"] * person * 0.42 * view[1]     # each shoulder's arm, out from the middle
    _arm(canvas, mask, walker, (shoulder[0] - reach, shoulder_y + limb * 0.3), walker["arm_swing"] * swing,
         person, _darker(walker["top"]), view[0])
    _legs(canvas, mask, walker, hip, phase, person, view)
    _fill(canvas, mask, [(hip[0] - waist / 2, hip[1] + limb * 0.5), (hip[0] + waist / 2, hip[1] + limb * 0.5),
                         (shoulder[0] + depth / 2, shoulder_y), (shoulder[0] - depth / 2, shoulder_y)],
          walker["top"])
    _ellipse(canvas, mask, (shoulder[0], shoulder_y + limb * 0.3), (depth / 2, limb * 0.6), walker["top"])
    if walker["skirt"]:
        _fill(canvas, mask, [(hip[0] - waist * 0.6, hip[1] - limb), (hip[0] + waist * 0.6, hip[1] - limb),
                             (hip[0] + waist * 0.75 + limb * 0.3, hip[1] + leg * 0.42),
                             (hip[0] - waist * 0.75 - limb * 0.3, hip[1] + leg * 0.42)], walker["bottom"])
    if walker["bag"]:
        near, back = hip[0] - waist * 0.35, hip[0] - waist * 0.35 - limb * 1.6
        _fill(canvas, mask, [(back, hip[1] - limb * 2), (near, hip[1] - limb * 2),
                             (near, hip[1] + limb * 2.5), (back, hip[1] + limb * 2.5)], walker["bag_colour"])
    _arm(canvas, mask, walker, (shoulder[0] + reach, shoulder_y + limb * 0.3), -walker["arm_swing"] * swing,
         person, _darker(walker["top"], NEAR_ARM), view[0])
    neck_top = (shoulder[0] + walker["head"] * person * 0.2 * view[0], shoulder_y - walker["head"] * person * 0.55)
    _limb(canvas, mask, shoulder, 0.0, shoulder_y - neck_top[1] + 1, limb * 0.9, walker["skin"])
    head = (neck_top[0] + walker["head"] * person * 0.15 * view[0], top + walker["head"] * person)
    r = walker["head"] * person
    _ellipse(canvas, mask, head, (r * 0.92, r), walker["skin"])
    # hair: the back and top of the head (the walker faces +x; turned, more of the back shows)
    _ellipse(canvas, mask, (head[0] - r * 0.25 * view[0], head[1] - r * 0.3), (r * (0.8 + 0.15 * view[1]), r * 0.72),
             walker["hair"])
    shaded = _shade(canvas, mask)
    return _downsample(shaded, mask, crop_shape)


def _shade(canvas: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A little volume: lighter towards the top, darker towards the feet, and each row lit from one side, darker
    towards the body's far edge (a round body in daylight)."""
    h, w = canvas.shape[:2]
    light = np.linspace(1.15, 0.75, h, dtype=np.float32)[:, None]
    cols = np.arange(w, dtype=np.float32)[None, :]
    filled = mask > 127
    left = np.where(filled, cols, np.inf).min(1, keepdims=True)
    right = np.where(filled, cols, -np.inf).max(1, keepdims=True)
    across = np.where(np.isfinite(left) & (right > left), (cols - left) / np.maximum(right - left, 1), 0.5)
    side = 1.15 - 0.55 * np.clip(across, 0, 1) ** 2
    return np.clip(canvas.astype(np.float32) * (light * side)[..., None], 0, 255).astype(np.uint8)


def _downsample(canvas: np.ndarray, mask: np.ndarray, crop_shape) -> tuple:
    import cv2
    size = (crop_shape[1], crop_shape[0])
    colour = cv2.resize(canvas, size, interpolation=cv2.INTER_AREA)
    coverage = cv2.resize(mask, size, interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
    # the colour was drawn over black: undo the edge's darkening where the person covers part of a pixel
    colour = np.clip(colour / np.maximum(coverage, 1e-3)[..., None], 0, 255).astype(np.uint8)
    return colour, coverage


def render_walkers(walkers: int, phases: int, crop_shape=(128, 64), seed: int = 0, batch: int = 0) -> dict:
    """``walkers`` random walkers, each facing right and, mirrored, left, at ``phases`` points of one walking
    cycle: colour (N, H, W, 3) BGR crops on a plain background, grey (N, H, W) (the runtime's BT.601), the
    person's mask (N, H, W) bool, direction (N,) (1 right, 0 left: the camera dataset's ``direction``) and
    sequence (N,) (one per walker and direction), walker by walker, phase by phase. ``batch``: another draw of
    as many walkers from the same seed (the bank screen's later rounds); batch 0 is the seed's first draw."""
    if walkers < 1 or phases < 1:
        raise ValueError(f"rendered bank needs at least one walker and one phase, got {walkers} and {phases}")
    from sensorveil.runtime.camera import to_gray
    rng = np.random.default_rng([seed, 2718] if not batch else [seed, 2718, batch])
    colours, masks, direction, sequence = [], [], [], []
    for k in range(int(walkers)):
        walker = random_walker(rng)
        drawn = [draw_walker(walker, p / phases, crop_shape) for p in range(int(phases))]
        for facing in (1, 0):
            for colour, coverage in drawn:
                colours.append(colour if facing else colour[:, ::-1])
                masks.append((coverage if facing else coverage[:, ::-1]) >= 0.5)
                direction.append(facing)
                sequence.append(2 * k + (1 - facing))
    colour, mask = np.stack(colours), np.stack(masks)
    colour = np.clip(colour + rng.normal(0, GRAIN, size=colour.shape), 0, 255).astype(np.uint8)
    # a plain, slightly noisy background behind each walker: the crop the model sees has one, as a camera's has
    ground = rng.integers(60, 200, size=(len(colour), 1, 1, 1)) + rng.normal(0, 6, size=colour.shape)
    on_ground = np.where(mask[..., None], colour, np.clip(ground, 0, 255)).astype(np.uint8)
    grey = np.stack([to_gray(c) for c in on_ground])
    # cut-outs reserve 0 for "not the person": a person's pixel is at least 1 in every channel
    colour = np.where(mask[..., None], np.maximum(colour, 1), 0).astype(np.uint8)
    return {"colour": colour, "colour_on_ground": on_ground, "x": grey, "foreground": mask,
            "direction": np.asarray(direction, np.int64), "sequence": np.asarray(sequence, np.int64)}
