"""Synthetic overhead depth frames (a Kinect v2 above a door, as in PR-GAN section 6.1), torch-free.

One renderer serves two callers: the ``synthetic-depth`` stream source of the runtime (full
512x424 frames, a person walking under the door) and the ``synthetic-depth`` training dataset
of ``sensorveil.sdk.datasets`` (180x180 person patches), which imports it from here. The frames
are clearly SYNTHETIC: a stand-in for a recorded depth stream, not a measurement of anyone.

What makes it a Kinect v2 a user would recognise:
- geometry: 512x424 pixels, 365 px focal length, each body part projected at its own depth
  (a head 1.1 m from the sensor looks 2.6x larger than a foot on a floor 2.9 m away);
- the sensor is mounted once: floor distance and tilt are fixed per installation (per seed);
- time-of-flight noise growing with the square of depth, invalid (0) pixels where the
  returned signal is lost: flying pixels at depth edges, scattered multipath drop-outs, and
  dark hair that absorbs the infrared (a per-person share of invalid pixels on the head);
- people who differ as adults do: stature, shoulder (bideltoid) breadth, head breadth and
  length, chest depth and foot length drawn per sex from normal distributions whose means and
  spreads approximate adult anthropometric surveys (e.g. ANSUR II), correlated with stature;
- a walking person: stride phase moves the feet and swings the arms, the head bobs and turns
  a little, the body yaws up to 15 degrees off the walking line.

Facing ("in" = towards +rows) shows where it shows from above: the nose and brow ahead of the
head's centre, the head carried ahead of the shoulder line, feet and toes pointing forward.
numpy and the standard library only.
"""
import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

KINECT_FOCAL_PX = 365.0  # Kinect v2 depth camera focal length, pixels
KINECT_SHAPE = (424, 512)  # rows, columns
DEPTH_RANGE_MM = (0.0, 4500.0)

# name: (female mean, female sd, male mean, male sd, correlation with stature), metres.
# Approximate adult means and spreads in the range anthropometric surveys report (ANSUR II's order
# of magnitude); the point is realistic scale and correlation, not any survey's exact figures.
BODY_MEASURES = {
    "height": (1.63, 0.064, 1.76, 0.069, 1.0),
    "shoulder_width": (0.42, 0.022, 0.49, 0.024, 0.45),  # bideltoid breadth
    "head_width": (0.148, 0.005, 0.156, 0.006, 0.25),
    "head_length": (0.186, 0.007, 0.199, 0.007, 0.3),
    "torso_depth": (0.235, 0.020, 0.250, 0.021, 0.3),  # chest depth
    "foot_length": (0.245, 0.011, 0.270, 0.012, 0.7),
}


@dataclass(frozen=True)
class BodyParams:
    """Fixed body of one synthetic identity (metres unless said)."""

    height: float  # floor to top of head (hair included)
    head_width: float
    head_length: float
    shoulder_width: float
    torso_depth: float  # front-to-back thickness at the shoulders
    shoulder_tilt: float  # right shoulder lower by this much (asymmetry)
    head_forward: float  # head centre ahead of the shoulder line (posture)
    arm_radius: float
    foot_length: float = 0.26
    hair_dropout: float = 0.0  # share of head pixels the sensor loses (dark hair absorbs IR)


def make_identities(n_identities: int = 20, seed: int = 0) -> "list[BodyParams]":
    """Body parameters of ``n_identities`` adults (about half women), fixed for a seed."""
    rng = np.random.default_rng([seed, 7919])
    male = rng.random(n_identities) < 0.5
    stature_z = rng.standard_normal(n_identities)
    cols = {}
    for name, (f_mean, f_sd, m_mean, m_sd, rho) in BODY_MEASURES.items():
        z = rho * stature_z + math.sqrt(1.0 - rho * rho) * rng.standard_normal(n_identities)
        cols[name] = np.where(male, m_mean + m_sd * z, f_mean + f_sd * z)
    cols["shoulder_tilt"] = rng.normal(0.0, 0.015, n_identities)
    cols["head_forward"] = rng.uniform(0.02, 0.06, n_identities)
    cols["arm_radius"] = 0.2 * cols["torso_depth"]
    # most heads return the signal; some dark-haired ones lose a visible share of it
    cols["hair_dropout"] = np.where(rng.random(n_identities) < 0.3, rng.uniform(0.1, 0.4, n_identities), 0.0)
    return [BodyParams(**{k: float(v[i]) for k, v in cols.items()}) for i in range(n_identities)]


def installation(seed: int) -> "tuple[float, float, float]":
    """One mounting of the sensor: floor distance (mm) and tilt (mm per pixel, rows and columns)."""
    rng = np.random.default_rng([seed, 4241])
    return float(rng.uniform(2700.0, 2900.0)), float(rng.uniform(-0.15, 0.15)), float(rng.uniform(-0.15, 0.15))


def _background(shape: "tuple[int, int]", mount: "tuple[float, float, float]") -> np.ndarray:
    rows, cols = np.ogrid[: shape[0], : shape[1]]
    base, tilt_rows, tilt_cols = mount
    return base + tilt_rows * (rows - shape[0] / 2) + tilt_cols * (cols - shape[1] / 2)


def _body_parts(p: BodyParams, floor_m: float, rng: np.random.Generator) -> list:
    """(centre x, centre y, half-width, half-length, top depth, dome, kind) per part, body
    coordinates in metres (x lateral, y forward), depths in metres from the sensor."""
    head_top = floor_m - p.height - rng.normal(0.0, 0.01)  # walking bob
    shoulder = floor_m - 0.82 * p.height
    stride = rng.uniform(-1.0, 1.0)  # walking phase: which foot leads, by how much
    hx, hy = rng.normal(0.0, 0.01), p.head_forward + rng.normal(0.0, 0.01)
    sw, fl = p.shoulder_width / 2, p.foot_length
    foot_y = 0.35 * fl  # the foot reaches forward of the ankle
    return [
        (hx, hy, p.head_width / 2, p.head_length / 2, head_top, 0.12, "head"),
        (hx, hy + 0.42 * p.head_length, 0.035, 0.03, head_top + 0.08, 0.03, "face"),  # brow
        (hx, hy + p.head_length / 2 + 0.01, 0.017, 0.028, head_top + 0.11, 0.02, "face"),  # nose
        (0.0, 0.0, sw, p.torso_depth / 2, shoulder, 0.10, "torso"),
        # hanging arms show from above only as far as they swing out of the vertical
        (-0.93 * sw, 0.12 * stride, p.arm_radius, 0.05 + 0.07 * abs(stride), shoulder + 0.10, 0.05, "limb"),
        (0.93 * sw, -0.12 * stride, p.arm_radius, 0.05 + 0.07 * abs(stride), shoulder + 0.10, 0.05, "limb"),
        (-0.09, foot_y - 0.30 * stride, 0.045, fl / 2, floor_m - 0.08, 0.02, "limb"),
        (0.09, foot_y + 0.30 * stride, 0.045, fl / 2, floor_m - 0.08, 0.02, "limb"),
    ]


def _draw_person(depth: np.ndarray, center: "tuple[float, float]", p: BodyParams, facing: int,
                 rng: np.random.Generator, floor_m: float) -> np.ndarray:
    """Draw the person into ``depth`` (mm, in place) around ``center`` (row, col); returns the
    mask of pixels where the head is the nearest surface (for the hair's drop-outs)."""
    # facing 0 ("in") looks down the image (+row); "out" is the same body turned 180 deg
    angle = math.pi * facing + math.radians(rng.uniform(-15, 15))
    cos_a, sin_a = math.cos(angle), math.sin(angle)
    head = np.zeros(depth.shape, dtype=bool)
    for cx, cy, ax, ay, top, dome, kind in _body_parts(p, floor_m, rng):
        scale = KINECT_FOCAL_PX / (top + dome / 2)  # pixels per metre at the part's own depth
        # the part's centre in image coordinates, then a window holding it
        row_c = center[0] + scale * (sin_a * cx + cos_a * cy)
        col_c = center[1] + scale * (cos_a * cx - sin_a * cy)
        reach = scale * max(ax, ay) + 1
        r0, r1 = max(int(row_c - reach), 0), min(int(row_c + reach) + 2, depth.shape[0])
        c0, c1 = max(int(col_c - reach), 0), min(int(col_c + reach) + 2, depth.shape[1])
        if r0 >= r1 or c0 >= c1:
            continue
        dr, dc = np.ogrid[r0:r1, c0:c1]
        dr, dc = (dr - row_c) / scale, (dc - col_c) / scale
        bx = cos_a * dc + sin_a * dr   # body coordinates relative to the part's centre
        by = -sin_a * dc + cos_a * dr
        r2 = (bx / ax) ** 2 + (by / ay) ** 2
        surface = np.where(r2 < 1.0, (top + dome * r2) * 1000.0, np.inf)
        if kind == "torso":   # one shoulder sits lower
            surface = surface + 1000.0 * p.shoulder_tilt * bx / ax
        window = depth[r0:r1, c0:c1]
        nearer = surface < window
        window[nearer] = surface[nearer]
        head_window = head[r0:r1, c0:c1]
        head_window[nearer] = kind == "head"
    return head


def _sensor_noise(depth: np.ndarray, rng: np.random.Generator, lost: "np.ndarray | None" = None) -> np.ndarray:
    """Time-of-flight noise (sigma grows with depth squared) and invalid (0) pixels: flying
    pixels at depth edges, scattered multipath drop-outs, and ``lost`` (dark hair)."""
    sigma = 1.5 + 0.5e-6 * depth ** 2
    noisy = depth + rng.standard_normal(depth.shape) * sigma
    edge = np.zeros(depth.shape, dtype=bool)
    edge[:, 1:] |= np.abs(np.diff(depth, axis=1)) > 100
    edge[1:, :] |= np.abs(np.diff(depth, axis=0)) > 100
    drop = (rng.random(depth.shape) < 0.003) | (edge & (rng.random(depth.shape) < 0.5))
    if lost is not None:
        drop |= lost
    noisy[drop] = 0.0
    return np.clip(np.round(noisy), *DEPTH_RANGE_MM).astype(np.uint16)


def render_depth_frame(identity_params: BodyParams, facing: int, rng: np.random.Generator,
                       frame_shape: "tuple[int, int]" = KINECT_SHAPE,
                       center: "tuple[float, float] | None" = None,
                       mount: "tuple[float, float, float] | None" = None) -> np.ndarray:
    """One overhead depth frame (uint16 mm, Kinect v2 size by default) with the person at
    ``center`` (row, col; random away from the border if None), on the floor of ``mount``
    (:func:`installation`; a random one if None)."""
    if facing not in (0, 1):
        raise ValueError(f"facing must be 0 (in) or 1 (out), got {facing!r}")
    if mount is None:
        mount = installation(int(rng.integers(1 << 31)))
    depth = _background(frame_shape, mount)
    if center is None:
        margin = np.minimum(np.asarray(frame_shape) // 2 - 1, 90)
        center = tuple(rng.uniform(margin, np.asarray(frame_shape) - margin))
    head = _draw_person(depth, center, identity_params, facing, rng, mount[0] / 1000.0)
    lost = head & (rng.random(frame_shape) < identity_params.hair_dropout)
    return _sensor_noise(depth, rng, lost)


def synthetic_depth_frames(n: int, seed: int = 0, n_identities: int = 20,
                           frame_shape: "tuple[int, int]" = KINECT_SHAPE) -> "Iterator[tuple[np.ndarray, int, int]]":
    """Yield ``n`` full frames as (frame, identity, facing), random labels, one installation."""
    identities, mount = make_identities(n_identities, seed), installation(seed)
    rng = np.random.default_rng([seed, 1])
    for _ in range(n):
        ident, facing = int(rng.integers(n_identities)), int(rng.integers(2))
        yield render_depth_frame(identities[ident], facing, rng, frame_shape, mount=mount), ident, facing


def walk_through_door(n_frames: int, seed: "int | None" = None, n_identities: int = 20,
                      frame_shape: "tuple[int, int]" = KINECT_SHAPE) -> Iterator[np.ndarray]:
    """Yield ``n_frames`` full frames of one person walking under the sensor.

    The person enters at one image edge and leaves at the other (along the rows, the
    way people pass a door sensor), so a stream of these frames exercises the person
    finder on a moving target rather than on a centred one.
    """
    rng = np.random.default_rng(seed)
    identity_seed = int(rng.integers(1 << 31))
    identities, mount = make_identities(n_identities, identity_seed), installation(identity_seed)
    person = identities[int(rng.integers(n_identities))]
    facing = int(rng.integers(2))
    rows, cols = frame_shape
    margin = min(rows, cols) * 0.25
    path_rows = np.linspace(margin, rows - margin, max(n_frames, 1))
    if facing:
        path_rows = path_rows[::-1]   # facing out walks up the image
    column = rng.uniform(cols * 0.35, cols * 0.65)
    for row in path_rows[:n_frames]:
        yield render_depth_frame(person, facing, rng, frame_shape, center=(row, column), mount=mount)
