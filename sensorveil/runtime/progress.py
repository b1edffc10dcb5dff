"""A one-line progress report for `sensorveil run` and `preview` on recorded sources.

Standard library only (tqdm is a training extra, not on a board). On a terminal the line is
rewritten in place a few times a second; in a log it is a new line every few seconds.
"""
import sys
import time

TERMINAL_EVERY_S = 0.5
LOG_EVERY_S = 5.0


def expected_frames(source) -> "int | None":
    """How many frames a recorded source holds, when it can tell; None for live sensors."""
    if getattr(source, "live", False):
        return None
    return getattr(source, "announced_frames", None)


class Progress:
    """``update(counters)`` after each frame; ``close()`` ends the line."""

    def __init__(self, total: "int | None", out=None, label: str = "frames"):
        self.total, self.label = total, label
        self.out = out or sys.stderr
        self.terminal = hasattr(self.out, "isatty") and self.out.isatty()
        self.every = TERMINAL_EVERY_S if self.terminal else LOG_EVERY_S
        self.started = self.last = time.monotonic()
        self.shown = False

    def update(self, counters, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        done = counters.frames_out
        rate = done / (now - self.started) if now > self.started else 0.0
        line = f"{self.label} {done}"
        if self.total:
            left = max(self.total - counters.frames_in, 0)
            line += f"/{self.total} ({100 * min(counters.frames_in / self.total, 1):.0f}%)"
            line += f", {left / rate:.0f} s left" if rate > 0 else ""
        line += f", {rate:.1f} FPS, bad {counters.bad}, dropped {counters.dropped}"
        self.out.write(("\r" + line + "   ") if self.terminal else line + "\n")
        self.out.flush()
        self.shown = True

    def close(self, counters) -> None:
        self.update(counters, force=True)
        if self.terminal:
            self.out.write("\n")
            self.out.flush()
