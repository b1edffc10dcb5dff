"""A line every few seconds while a quiet library works (quantization, a compiler): a user watching an
export never waits more than 30 seconds without a word (issue 54)."""
import sys
import threading
import time

HEARTBEAT_S = 20.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Heartbeat:
    """``with Heartbeat("int8 quantization"):`` a line every ``every`` seconds while a quiet library works."""

    def __init__(self, label: str, log=_stderr, every: float = HEARTBEAT_S):
        self.label, self.log, self.every = label, log, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._done.wait(self.every):
            self.log(f"{self.label}: still working ({time.monotonic() - started:.0f} s)")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
