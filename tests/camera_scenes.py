"""Made camera frames shared by the unit and integration tests of the camera pipeline."""
import numpy as np

PERSON_GREY = 20                                  # the made person's grey level, on a scene of 120
STANDS_AT = (slice(60, 96), slice(70, 82))        # where they stand once they have walked in


def walk_in_and_stand(stand_frames):
    """Grey frames of a still scene: empty for 25 frames, then a dark 12x36 person walks in from the left
    (2 px a frame for 30 frames) and stands still at STANDS_AT for ``stand_frames`` frames."""
    rng = np.random.default_rng(0)
    frames = []
    for k in range(25 + 30 + stand_frames):
        frame = np.clip(120 + rng.normal(0, 2, (120, 160)), 0, 255).astype(np.uint8)
        if k >= 25:
            x = 10 + 2 * min(k - 25, 30)
            frame[60:96, x:x + 12] = PERSON_GREY
        frames.append(frame)
    return frames
