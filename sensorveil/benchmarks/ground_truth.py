"""A MOTChallenge gt.txt (frame, id, left, top, width, height, ...; frames from 1) read for a clip of the same
frames, possibly at another size (walkway.avi is MOT15's PETS09-S2L1 scaled from 768x576 to 480x360): the
people there are on each frame, which `sensorveil camera-audit --ground-truth` scores the counts against."""
from pathlib import Path

import numpy as np

from sensorveil.runtime.errors import InputError

COLUMNS = "frame,id,left,top,width,height[,...]"


def ground_truth(path: Path, size: tuple, clip_size: tuple) -> dict:
    """frame (0-based) -> (ids, centre x, centre y, width) of the gt.txt's people, scaled to the clip's pixels.
    A file that is not MOTChallenge rows is one InputError naming it and the columns expected."""
    table = read_rows(Path(path))
    sx, sy = clip_size[0] / size[0], clip_size[1] / size[1]
    people = {}
    for frame in np.unique(table[:, 0]).astype(int):
        rows = table[table[:, 0] == frame]
        people[frame - 1] = (rows[:, 1].astype(np.int64), (rows[:, 2] + rows[:, 4] / 2) * sx,
                             (rows[:, 3] + rows[:, 5] / 2) * sy, rows[:, 4] * sx)
    return people


def read_rows(path: Path) -> np.ndarray:
    import warnings
    if not path.is_file():
        raise InputError(f"ground truth {path}: no such file; expected a MOTChallenge gt.txt")
    try:
        with warnings.catch_warnings():      # an empty file warns, then gets the one error below
            warnings.simplefilter("ignore", UserWarning)
            table = np.loadtxt(path, delimiter=",", ndmin=2)
    except OSError as error:
        raise InputError(f"ground truth {path}: {error.strerror or error}; expected a MOTChallenge gt.txt") from None
    except ValueError as error:
        raise InputError(f"ground truth {path}: {error}; expected numeric rows {COLUMNS}") from None
    if table.size == 0:
        raise InputError(f"ground truth {path}: no rows; expected rows {COLUMNS}")
    if table.shape[1] < 6:
        raise InputError(f"ground truth {path}: {table.shape[1]} columns in {table.shape[0]} rows; expected rows "
                         f"{COLUMNS}")
    if not np.isfinite(table[:, :6]).all():
        raise InputError(f"ground truth {path}: a value that is not a finite number; expected rows {COLUMNS}")
    if (table[:, 0] < 1).any() or (table[:, 4:6] <= 0).any():
        raise InputError(f"ground truth {path}: a frame below 1 or a box without width or height; expected "
                         f"MOTChallenge's frames from 1 and boxes of positive size")
    return table


def people_in_frame(people: dict, clip_size: tuple, frames: int) -> dict:
    """frame (0-based, every one of ``frames``) -> how many ground-truth people stand in it: those whose box centre
    lies inside the frame (an annotator's box runs on past the edge for a person walking out of view)."""
    width, height = clip_size
    counts = {}
    for frame in range(int(frames)):
        _, cx, cy, _ = people.get(frame, (None, np.zeros(0), np.zeros(0), None))
        counts[frame] = int(((cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)).sum())
    return counts


def true_counts(path: Path, clip: Path, size: "tuple | None" = None) -> dict:
    """frame (0-based) -> the people a gt.txt puts in each of the clip's frames; ``size``: the (width, height) its
    boxes are in (the clip's own by default). A gt.txt whose frames lie past the clip's end is refused: it
    annotates another clip."""
    clip_size = clip_size_of(clip)
    people = ground_truth(path, size or clip_size, clip_size)
    frames = frame_count(clip)
    if min(people) >= frames:
        raise InputError(f"ground truth {path}: its first annotated frame is {min(people) + 1}, the clip {clip} has "
                         f"{frames}; expected the gt.txt of this clip's frames")
    return people_in_frame(people, clip_size, frames)


def frame_count(clip: Path) -> int:
    """How many frames the clip decodes to, grabbed without keeping them (a header's count can be off)."""
    import cv2
    capture, frames = cv2.VideoCapture(str(clip)), 0
    while capture.grab():
        frames += 1
    capture.release()
    return frames


def clip_size_of(clip: Path) -> tuple:
    """(width, height) of a clip's frames."""
    import cv2
    capture = cv2.VideoCapture(str(clip))
    size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    capture.release()
    return size
