"""Synthetic overhead depth frames (an OccuTherm-like Kinect v2 above a door), torch-free.

One renderer serves two callers: the ``synthetic-depth`` stream source of the runtime (full
512x424 frames, a person walking under the door) and the ``synthetic-depth`` training dataset
of ``sensorveil.sdk.datasets`` (180x180 patches), which imports it from here. The frames are
clearly SYNTHETIC: a stand-in for a recorded depth stream, not a measurement of anyone.
numpy and the standard library only.
"""
import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

KINECT_FOCAL_PX = 365.0  # Kinect v2 depth camera focal length, pixels
DEPTH_RANGE_MM = (0.0, 4500.0)


@dataclass(frozen=True)
class BodyParams:
    """Fixed body of one synthetic identity (metres)."""

    height: float  # floor to top of head
    head_width: float
    head_length: float
    shoulder_width: float
    torso_depth: float  # front-to-back thickness at the shoulders
    shoulder_tilt: float  # right shoulder lower by this much (asymmetry)
    head_forward: float  # head centre ahead of the shoulder line
    arm_radius: float


def make_identities(n_identities: int = 8, seed: int = 0) -> "list[BodyParams]":
    """Body parameters of ``n_identities`` people, fixed for a seed."""
    rng = np.random.default_rng([seed, 7919])
    u = lambda lo, hi: rng.uniform(lo, hi, n_identities)  # noqa: E731
    cols = dict(
        height=u(1.55, 1.95), head_width=u(0.14, 0.18), head_length=u(0.18, 0.22),
        shoulder_width=u(0.36, 0.46), torso_depth=u(0.20, 0.30), shoulder_tilt=u(-0.04, 0.04),
        head_forward=u(0.0, 0.05), arm_radius=u(0.04, 0.06),
    )
    return [BodyParams(**{k: float(v[i]) for k, v in cols.items()}) for i in range(n_identities)]


def _background(shape: "tuple[int, int]", rng: np.random.Generator) -> np.ndarray:
    """Floor 2700-2900 mm away with a slight tilt (sensor not exactly level)."""
    rows, cols = np.ogrid[: shape[0], : shape[1]]
    base = rng.uniform(2700.0, 2900.0)
    tilt = rng.uniform(-0.15, 0.15, 2)  # mm per pixel
    return base + tilt[0] * (rows - shape[0] / 2) + tilt[1] * (cols - shape[1] / 2)


def _ellipse_depth(bx, by, cx, cy, ax, ay, top, dome):
    """Depth of a dome-shaped ellipse in body coordinates (metres); inf outside."""
    r2 = ((bx - cx) / ax) ** 2 + ((by - cy) / ay) ** 2
    return np.where(r2 < 1.0, top + dome * r2, np.inf)


def _person_depth(bx, by, p: BodyParams, floor_m: float, rng: np.random.Generator) -> np.ndarray:
    """Nearest body surface (metres from sensor) at body coords (bx lateral,
    by forward = facing direction).  Front cues: nose bump, head ahead of the
    shoulders and a leading foot, so facing is an asymmetry, not a pixel."""
    height = p.height + rng.normal(0, 0.02)  # walking bob, head bowed or raised
    head_top, shoulder = floor_m - height, floor_m - 0.82 * height
    swing = rng.uniform(-0.08, 0.08)  # arms swing opposite each other
    head_x, head_y = rng.normal(0, 0.01, 2) + (0.0, p.head_forward)
    sw = p.shoulder_width / 2
    parts = [
        _ellipse_depth(bx, by, head_x, head_y, p.head_width / 2, p.head_length / 2, head_top, 0.10),
        _ellipse_depth(bx, by, head_x, head_y + p.head_length / 2, 0.02, 0.03, head_top + 0.10, 0.02),
        # torso: tilt applied through bx so one shoulder sits lower
        _ellipse_depth(bx, by, 0.0, 0.0, sw, p.torso_depth / 2, shoulder, 0.08) + p.shoulder_tilt * bx / sw,
        _ellipse_depth(bx, by, -0.9 * sw, swing, p.arm_radius, 0.12, shoulder + 0.12, 0.05),
        _ellipse_depth(bx, by, 0.9 * sw, -swing, p.arm_radius, 0.12, shoulder + 0.12, 0.05),
        # leading foot, opposite the forward-swung arm as in walking
        _ellipse_depth(bx, by, 0.1 if swing > 0 else -0.1, p.torso_depth / 2 + 0.12, 0.05, 0.11,
                       floor_m - 0.10, 0.02),
    ]
    return np.minimum.reduce(parts)


def _draw_person(depth: np.ndarray, center: "tuple[float, float]", p: BodyParams, facing: int,
                 rng: np.random.Generator) -> None:
    """Draw the person into ``depth`` (mm, in place) around ``center`` (row, col)."""
    floor_m = float(np.median(depth)) / 1000.0
    px_per_m = KINECT_FOCAL_PX / (floor_m - 0.82 * p.height)  # scale at shoulder height
    half = int(0.75 * px_per_m) + 1  # window holding the whole person
    r0, c0 = max(int(center[0]) - half, 0), max(int(center[1]) - half, 0)
    r1, c1 = min(int(center[0]) + half, depth.shape[0]), min(int(center[1]) + half, depth.shape[1])
    if r0 >= r1 or c0 >= c1:
        return
    dr, dc = np.ogrid[r0:r1, c0:c1]
    dr, dc = (dr - center[0]) / px_per_m, (dc - center[1]) / px_per_m
    # facing 0 ("in") looks down the image (+row); "out" is the same body turned 180 deg
    angle = math.pi * facing + math.radians(rng.uniform(-15, 15))
    bx = math.cos(angle) * dc - math.sin(angle) * dr
    by = math.sin(angle) * dc + math.cos(angle) * dr
    person = _person_depth(bx, by, p, floor_m, rng) * 1000.0
    window = depth[r0:r1, c0:c1]
    np.minimum(window, person, out=window)


def _sensor_noise(depth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Kinect-like noise: sigma grows with depth squared, invalid (0) pixels
    sprinkled at random and at depth edges (flying pixels are dropped)."""
    noisy = depth + rng.normal(0.0, 1.0, depth.shape) * (1.0 + 1.5e-6 * depth**2)
    edge = np.zeros(depth.shape, dtype=bool)
    edge[:, 1:] |= np.abs(np.diff(depth, axis=1)) > 150
    edge[1:, :] |= np.abs(np.diff(depth, axis=0)) > 150
    drop = (rng.random(depth.shape) < 0.01) | (edge & (rng.random(depth.shape) < 0.4))
    noisy[drop] = 0.0
    return np.clip(np.round(noisy), *DEPTH_RANGE_MM).astype(np.uint16)


def render_depth_frame(identity_params: BodyParams, facing: int, rng: np.random.Generator,
                       frame_shape: "tuple[int, int]" = (424, 512),
                       center: "tuple[float, float] | None" = None) -> np.ndarray:
    """One overhead depth frame (uint16 mm, Kinect v2 size by default) with the
    person at ``center`` (row, col; random away from the border if None)."""
    if facing not in (0, 1):
        raise ValueError(f"facing must be 0 (in) or 1 (out), got {facing!r}")
    depth = _background(frame_shape, rng)
    if center is None:
        margin = np.minimum(np.asarray(frame_shape) // 2 - 1, 90)
        center = tuple(rng.uniform(margin, np.asarray(frame_shape) - margin))
    _draw_person(depth, center, identity_params, facing, rng)
    return _sensor_noise(depth, rng)


def synthetic_depth_frames(n: int, seed: int = 0, n_identities: int = 8,
                           frame_shape: "tuple[int, int]" = (424, 512)) -> "Iterator[tuple[np.ndarray, int, int]]":
    """Yield ``n`` full frames as (frame, identity, facing), random labels."""
    identities = make_identities(n_identities, seed)
    rng = np.random.default_rng([seed, 1])
    for _ in range(n):
        ident, facing = int(rng.integers(n_identities)), int(rng.integers(2))
        yield render_depth_frame(identities[ident], facing, rng, frame_shape), ident, facing


def walk_through_door(n_frames: int, seed: "int | None" = None, n_identities: int = 8,
                      frame_shape: "tuple[int, int]" = (424, 512)) -> Iterator[np.ndarray]:
    """Yield ``n_frames`` full frames of one person walking under the sensor.

    The person enters at one image edge and leaves at the other (along the rows, the
    way people pass a door sensor), so a stream of these frames exercises the person
    finder on a moving target rather than on a centred one.
    """
    rng = np.random.default_rng(seed)
    identities = make_identities(n_identities, int(rng.integers(1 << 31)))
    person = identities[int(rng.integers(n_identities))]
    facing = int(rng.integers(2))
    rows, cols = frame_shape
    margin = min(rows, cols) * 0.25
    path_rows = np.linspace(margin, rows - margin, max(n_frames, 1))
    if facing:
        path_rows = path_rows[::-1]   # facing out walks up the image
    column = rng.uniform(cols * 0.35, cols * 0.65)
    for row in path_rows[:n_frames]:
        yield render_depth_frame(person, facing, rng, frame_shape, center=(row, column))
