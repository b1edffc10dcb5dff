"""A line at least every HEARTBEAT_S seconds while quiet work runs (quantization, the int8 privacy audit, a
compiler): someone watching an export never waits more than 30 seconds without a word."""
import sys
import threading
import time

HEARTBEAT_S = 20.0


class Heartbeat:
    """``with Heartbeat("int8 quantization") as beat:`` logs "LABEL: still working (N s)" whenever
    ``every`` seconds (default HEARTBEAT_S) pass without a line; ``beat.say(line)`` logs the work's own
    progress and restarts the wait. Lines go to stderr as it is when the heartbeat starts, so a library
    that swaps sys.stderr to silence itself does not silence the heartbeat."""

    def __init__(self, label: str, log=None, every: "float | None" = None):
        stream = sys.stderr
        self.label = label
        self.log = log or (lambda line: print(line, file=stream, flush=True))
        self.every = HEARTBEAT_S if every is None else every
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def say(self, line: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            self.log(line)

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._done.wait(min(1.0, self.every / 4)):
            with self._lock:
                now = time.monotonic()
                if now - self._last >= self.every:
                    self._last = now
                    self.log(f"{self.label}: still working ({now - started:.0f} s)")

    def __enter__(self) -> "Heartbeat":
        self._last = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
