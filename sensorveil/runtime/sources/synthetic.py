"""SYNTHETIC depth, for trying a depth bundle without a sensor."""
from sensorveil.runtime.sources.base import Frame, Source


class SyntheticDepthSource(Source):
    """SYNTHETIC 512x424 overhead depth of one person walking under a door, looped.

    Rendering takes tens of milliseconds a frame, slower than the 30 FPS sensor it stands
    in for, so ``open()`` renders one walk of ``loop_frames`` frames and ``read()`` replays
    it with fresh timestamps. Capture time then reflects a sensor handing over a frame,
    not the renderer. ``frames`` bounds the stream (None: endless, like a sensor).
    """

    fps = 30.0

    def __init__(self, uri: str, seed: "int | None" = None, loop_frames: int = 30, frames: "int | None" = None):
        super().__init__(uri)
        self.seed, self.loop_frames, self.frames = seed, loop_frames, frames
        self.announced_frames = frames

    def open(self) -> None:
        from sensorveil.runtime.synthetic_depth import walk_through_door
        self.walk = list(walk_through_door(self.loop_frames, seed=self.seed))
        for frame in self.walk:
            frame.setflags(write=False)   # replayed frames must not be altered downstream
        self._count = 0

    def read(self) -> "Frame | None":
        if self.frames is not None and self._count >= self.frames:
            return None
        index = self._next_index()
        return Frame(self.walk[index % len(self.walk)], index / self.fps, index, "depth")
