"""The scene a cut-out release pastes its substitutes on, built so that it fails closed.

A background model's picture (MOG2's) learns whatever moves slowly or stands: slow walkers and a standing
group came out of it as translucent people and trails. QuietScene takes a pixel from the camera only where
nothing was seen there for ``horizon`` frames in a row: no motion in the detector's foreground mask, no
detected box and no tracked person (each grown by a block). Until then a region shows the neutral scene (flat
grey, or a still the operator gives), never the first raw frames. A person nobody ever detects and who never
moves is the case this cannot see: only a learned detector finds them (issue 29); the leak meter in
scripts/camera_results.py measures what gets through.
"""
import numpy as np

SCENE_BLOCK = 8          # px: the scene is judged quiet or busy per block of this size
SCENE_HORIZON = 100      # frames a block must stay quiet before the camera may show it (10 s at 10 FPS)
NEUTRAL_GREY = 128       # the scene before any block is quiet: nothing of any frame


class QuietScene(object):
    """``update(frame, busy)`` after each frame; ``image`` is the scene to release around the people."""

    def __init__(self, shape, horizon=SCENE_HORIZON, block=SCENE_BLOCK, still=None):
        self.horizon, self.block = int(horizon), int(block)
        self.image = starting_scene(shape, still)
        blocks = (-(-shape[0] // self.block), -(-shape[1] // self.block))
        self.quiet = np.zeros(blocks, dtype=np.int32)     # frames in a row each block has been quiet

    def update(self, frame, busy):
        """``busy``: bool (H, W), True where a person is or may be in this frame. A new array each time, so a
        scene handed to an earlier frame's restore() is never changed under it."""
        busy_blocks = dilate(block_any(busy, self.block))
        self.quiet = np.where(busy_blocks, 0, np.minimum(self.quiet + 1, self.horizon))
        ready = self.quiet >= self.horizon
        if ready.any():
            mask = np.repeat(np.repeat(ready, self.block, 0), self.block, 1)[:frame.shape[0], :frame.shape[1]]
            image = self.image.copy()
            image[mask] = frame[mask]
            self.image = image
        return self.image


def starting_scene(shape, still=None):
    """The scene before any block is quiet: the operator's still, else flat neutral grey; nothing of any frame."""
    if still is None:
        return np.full(shape, NEUTRAL_GREY, dtype=np.uint8)
    if tuple(still.shape) != tuple(shape):
        raise ValueError("scene still of shape {}; expected the camera's {}".format(still.shape, tuple(shape)))
    return np.array(still, dtype=np.uint8)


def block_any(mask, block):
    """(H, W) bool -> (ceil(H / block), ceil(W / block)) bool: whether any pixel of each block is set."""
    h, w = mask.shape
    padded = np.zeros((-(-h // block) * block, -(-w // block) * block), dtype=bool)
    padded[:h, :w] = mask
    return padded.reshape(padded.shape[0] // block, block, padded.shape[1] // block, block).any(axis=(1, 3))


def dilate(blocks):
    """Each set block and its eight neighbours: a person's edge the mask missed is still busy."""
    grown = blocks.copy()
    grown[1:] |= blocks[:-1]
    grown[:-1] |= blocks[1:]
    wide = grown.copy()
    wide[:, 1:] |= grown[:, :-1]
    wide[:, :-1] |= grown[:, 1:]
    return wide


def busy_mask(shape, foreground, boxes, margin):
    """Where a person is or may be: the foreground mask (all of the frame when the detector has none) and every
    box grown by ``margin`` px."""
    busy = np.ones(shape, dtype=bool) if foreground is None else foreground.astype(bool)
    m = int(margin)
    for x, y, w, h in np.asarray(boxes, dtype=np.int64).reshape(-1, 4):
        busy[max(y - m, 0):max(y + h + m, 0), max(x - m, 0):max(x + w + m, 0)] = True
    return busy
