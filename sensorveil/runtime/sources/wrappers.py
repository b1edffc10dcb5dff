"""Sources wrapping a source: reopened after a disconnect (:class:`Reconnecting`), read ahead in a
thread (:class:`Prefetching`, on :class:`ReadAhead`, which the stream also uses)."""
import atexit
import queue
import threading
import time
import weakref
from typing import Callable

from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.sources.base import BadFrame, Frame, Source, SourceDisconnected

# -- resilience --------------------------------------------------------------------------
STALL_LIMIT_S = 60.0   # a live source that delivers no frame for this long (across reconnects) has ended


class Reconnecting(Source):
    """Wraps a live source: on disconnect, close it and reopen with exponential back-off.

    Waits ``base_delay_s * 2**k`` (capped at ``max_delay_s``) before attempt k; after
    ``max_attempts`` failed reopenings in a row it raises BackendUnavailableError that names
    the source and the last reason. ``reconnects`` counts successful reopenings.

    Overall stall limit: a source that reopens fine and then never delivers (a server that accepts and never
    sends, a camera that enumerates and stays dark) would otherwise be reopened without end. When no frame has
    come for ``stall_limit_s`` (since the last frame, or since the first open), the next disconnect ends the
    source with one BackendUnavailableError.
    """

    def __init__(self, inner: Source, max_attempts: int = 6, base_delay_s: float = 0.5,
                 max_delay_s: float = 8.0, sleep: Callable[[float], None] = time.sleep,
                 stall_limit_s: float = STALL_LIMIT_S, clock: Callable[[], float] = time.monotonic):
        super().__init__(inner.uri)
        self.inner = inner
        self.live = inner.live
        self.max_attempts, self.base_delay_s, self.max_delay_s = max_attempts, base_delay_s, max_delay_s
        self.sleep = sleep
        self.reconnects = 0
        self.stall_limit_s, self.clock = stall_limit_s, clock
        self._last_progress = None     # when the last frame came (or the first open began)

    @property
    def fps(self):
        return self.inner.fps

    @property
    def announced_frames(self):
        return self.inner.announced_frames

    def open(self) -> None:
        self._last_progress = self.clock()
        try:
            self.inner.open()
        except SourceDisconnected as error:
            self._reopen(error)

    def read(self) -> "Frame | None":
        while True:     # a loop, not a recursion: a source that reopens and drops at once must not deepen the stack
            try:
                frame = self.inner.read()
            except SourceDisconnected as error:
                self._reopen(error)
                self.reconnects += 1
                continue
            self._last_progress = self.clock()
            return frame

    def _check_stall(self, reason) -> None:
        if self._last_progress is None:
            self._last_progress = self.clock()
        stalled = self.clock() - self._last_progress
        if stalled > self.stall_limit_s:
            raise BackendUnavailableError(
                f"{self.uri}: no frame for {stalled:.0f} s (the stall limit is {self.stall_limit_s:g} s); gave up "
                f"after {self.reconnects} reconnect(s); last error: {reason}")

    def _reopen(self, reason: SourceDisconnected) -> None:
        for attempt in range(self.max_attempts):
            self._check_stall(reason)
            self.inner.close()
            self.sleep(min(self.base_delay_s * 2 ** attempt, self.max_delay_s))
            try:
                self.inner.open()
                return
            except SourceDisconnected as error:
                reason = error
        self._check_stall(reason)
        raise BackendUnavailableError(
            f"{self.uri}: gave up after {self.max_attempts} attempts to (re)open it; last error: {reason}")

    def close(self) -> None:
        self.inner.close()


class Prefetching(Source):
    """Reads the inner source ``depth`` frames ahead in a background thread (``ReadAhead``), so decoding
    the next frame overlaps privatizing this one: on walkway.avi capture was a third of the stream's time
    per frame. A BadFrame comes out of ``read()`` where it happened; anything else ends the reader and
    is raised in the caller.

    The thread starts at the first ``read()``, not at ``open()``: a caller that is itself a reader
    thread (the stream reading ahead) calls ``read_direct()`` instead, and each frame then changes
    threads once, not twice (a second hop costs the stream frame rate for nothing)."""

    def __init__(self, inner: Source, depth: int = 2):
        super().__init__(inner.uri)
        self.inner, self.live, self.depth = inner, inner.live, depth
        self._opened = False
        self._reader = None                # the prefetch thread, started by the first read()

    fps = property(lambda self: self.inner.fps)
    announced_frames = property(lambda self: self.inner.announced_frames)
    reconnects = property(lambda self: getattr(self.inner, "reconnects", 0))

    def open(self) -> None:
        if self._opened:                   # open_source opened it; a `with` block opens again
            return
        self.inner.open()
        self._opened = True

    def _read_one(self):
        try:
            return self.inner.read()
        except BadFrame as error:          # one frame, not the end: handed over as an item
            return error

    def read(self) -> "Frame | None":
        if not self._opened:
            raise InputError(f"{self.uri}: read() before open()")
        if self._reader is None:
            self._reader = ReadAhead(self._read_one, depth=self.depth, name=f"prefetch {self.uri}")
        item = self._reader.take()
        if isinstance(item, BadFrame):
            raise item
        return item

    def read_direct(self) -> "Frame | None":
        """The next frame read in the caller's thread, for a caller that reads ahead itself; once
        ``read()`` has started the prefetch thread, frames keep coming from it, in order."""
        if self._reader is not None or not self._opened:   # read() keeps the order, or says open() first
            return self.read()
        return self.inner.read()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.stop()
            self._reader = None
        self._opened = False
        self.inner.close()


class ReadAhead:
    """Runs ``produce`` in a daemon thread, ``depth`` items ahead of the consumer: decoding (``Prefetching``)
    or decoding and pre-processing (the stream's read-ahead) of the next frames overlap the model on this
    one, since OpenCV, numpy and the backends release the GIL (docs/stream_plumbing.md: decoding
    walkway.avi alone beside the depth model alone). The queue is bounded, so a slow consumer
    holds at most ``depth`` items and a live camera drops in its own driver, as it would without the
    thread. Anything ``produce`` raises ends the reader and is raised in the consumer's thread, in order;
    ``None`` from ``produce`` is the end of the source.

    A reader its owner never stopped (a script that ends without closing its source) is stopped when the
    interpreter exits, before daemon threads are torn down: a daemon thread ended while inside a decoder's
    C++ code aborts the whole process ("FATAL: exception not rethrown"; CI saw it, and here 1 run in 30)."""

    def __init__(self, produce, depth: int = 2, name: str = "sensorveil read-ahead"):
        self.produce = produce
        self.items = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()
        self.ended = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        _RUNNING.add(self)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                item = self.produce()
            except BaseException as error:   # noqa: B902 - handed to the consumer, not swallowed
                self._put(_ReaderFailed(error))
                return
            self._put(item)
            if item is None:
                return

    def _put(self, item) -> None:
        while not self.stopping.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def take(self):
        """The next item; None once the source has ended."""
        if self.ended:
            return None
        item = self.items.get()
        if isinstance(item, _ReaderFailed):
            self.ended = True
            raise item.error
        self.ended = item is None
        return item

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stopping.set()
        # the reader finishes the frame it is on; a read stuck in a driver is abandoned (daemon thread)
        self.thread.join(timeout=timeout_s)
        _RUNNING.discard(self)


_RUNNING = weakref.WeakSet()   # readers not yet stopped; weak, so a dropped reader is not kept alive here


@atexit.register
def _stop_readers_left_running() -> None:
    for reader in list(_RUNNING):
        reader.stop(timeout_s=2.0)


class _ReaderFailed:
    def __init__(self, error: BaseException):
        self.error = error
