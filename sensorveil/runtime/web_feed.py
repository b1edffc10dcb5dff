"""The web preview's live feed: the stream in a background thread, the newest JPEG of each view
and the live counters that the page and /api/status show."""
import collections
import threading
import time
from typing import Callable, Optional, Tuple

import numpy as np

from sensorveil.runtime.preprocessor import name_of
from sensorveil.runtime.preview import ViewComposer
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.sources import Source, _cv2
from sensorveil.runtime.stream import STAGES, Counters, Stream

JPEG_QUALITY = 85
PANEL_PX = 360            # panel height in the page
RECENT_FRAMES = 60        # window of the FPS and stage-time figures
COUNTER_KEYS = ("frames_in", "frames_out", "bad", "dropped", "reconnects")
VIEWS = ("raw", "privatized")


class LiveFeed:
    """Runs the stream in a thread and keeps the newest JPEG of each view plus live counters.

    A recorded source (a file) is played at its own frame rate, as its camera delivered it,
    so the page shows motion at the real speed; ``loop`` replays it from the start when it
    ends. A live source runs as fast as it delivers.
    """

    def __init__(self, privatizer: Privatizer, open_source: Callable[[], Source], frames: "int | None" = None,
                 raw: bool = True, loop: bool = False, panel_px: int = PANEL_PX):
        self.privatizer, self.open_source = privatizer, open_source
        self.max_frames, self.loop = frames, loop
        self.composer = ViewComposer(privatizer, panel_px)
        self.raw_locked = not raw            # --no-raw: can never be switched on
        self.raw_enabled = raw
        self.lock = threading.Lock()
        self.closing = threading.Event()     # set on shutdown: the thread and the MJPEG responses end
        self.jpeg = {"raw": None, "privatized": None}
        self.sequence = 0
        self.status, self.error = "starting", None
        self.source_uri = None
        self.finished = Counters()           # counters of earlier passes over a looped file
        self.stream: "Stream | None" = None
        self.passes = 0
        self.recent_times = collections.deque(maxlen=RECENT_FRAMES)
        self.recent_stages = collections.deque(maxlen=RECENT_FRAMES)
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="sensorveil-feed", daemon=True)

    # -- control ---------------------------------------------------------------------------
    def start(self) -> "LiveFeed":
        self.thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self.closing.set()
        self.thread.join(timeout_s)

    def set_raw(self, enabled: bool) -> None:
        with self.lock:
            if enabled and self.raw_locked:
                raise PermissionError("the raw view was switched off with --no-raw")
            self.raw_enabled = bool(enabled)
            if not enabled:
                self.jpeg["raw"] = None      # the last raw frame is not kept around either

    def latest(self, view: str) -> "Tuple[int, Optional[bytes]]":
        with self.lock:
            return self.sequence, self.jpeg[view]

    # -- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self.closing.is_set():
                with self.open_source() as source:
                    self.source_uri = source.uri
                    self._play(source)
                self.passes += 1
                if not self.loop or self.closing.is_set() or self._frames_left() == 0:
                    break
                self._finish_pass()
            self.status = "stopped" if self.closing.is_set() else "ended"
        except Exception as error:   # shown on the page and re-raised by serve(); the server stays up
            self.status, self.error = "failed", f"{type(error).__name__}: {error}"

    def _play(self, source: Source) -> None:
        self.stream = Stream(self.privatizer, source, frames=self._frames_left())
        interval = 1.0 / source.fps if (source.fps and not source.live) else 0.0
        next_due = time.monotonic()
        self.status = "running"
        for result in self.stream:
            self._publish(result)
            if self.closing.is_set():
                break
            if interval:   # a file plays at its camera's rate; a live sensor sets its own pace
                next_due = max(next_due + interval, time.monotonic() - interval)
                self.closing.wait(max(0.0, next_due - time.monotonic()))

    def _publish(self, result) -> None:
        cv2 = _cv2()
        if self.stream.counters.frames_out == 1:
            self.composer.fit(result)      # camera bundles: panels of the frames' aspect
        views = ("raw", "privatized") if self.raw_enabled else ("privatized",)
        encoded = {}
        for view in views:
            ok, data = cv2.imencode(".jpg", self.composer.panel_image(result, view),
                                    [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if ok:
                encoded[view] = data.tobytes()
        with self.lock:
            self.jpeg["privatized"] = encoded.get("privatized")
            self.jpeg["raw"] = encoded.get("raw") if self.raw_enabled else None
            self.sequence += 1
            self.recent_times.append(time.monotonic())
            self.recent_stages.append(result.timings_ms)

    def _frames_left(self) -> "int | None":
        if self.max_frames is None:
            return None
        done = self.finished.frames_out + (self.stream.counters.frames_out if self.stream else 0)
        return max(self.max_frames - done, 0)

    def _finish_pass(self) -> None:
        for key in COUNTER_KEYS:
            setattr(self.finished, key, getattr(self.finished, key) + getattr(self.stream.counters, key))
        self.stream = None

    # -- figures ---------------------------------------------------------------------------
    def counters(self) -> dict:
        current = self.stream.counters if self.stream is not None else Counters()
        with self.lock:
            times, stages = list(self.recent_times), list(self.recent_stages)
        fps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        stage_p50 = {stage: float(np.median([t[stage] for t in stages])) for stage in STAGES if stages}
        preprocessor = name_of(self.stream.preprocessor) if self.stream is not None else None
        return {"status": self.status, "error": self.error, "source": self.source_uri, "preprocessor": preprocessor,
                "backend": self.privatizer.backend_name, "fps": fps,
                **{key: getattr(self.finished, key) + getattr(current, key) for key in COUNTER_KEYS},
                "stages_ms_p50": stage_p50, "passes": self.passes, "raw_enabled": self.raw_enabled,
                "raw_locked": self.raw_locked, "uptime_s": time.monotonic() - self.started,
                "recent_errors": list(current.errors)}

    def report(self) -> dict:
        """The last pass's stream report, with the counters summed over every pass."""
        report = self.stream.report() if self.stream is not None else {}
        report.update({key: value for key, value in self.counters().items() if key in COUNTER_KEYS})
        report["passes"] = self.passes
        return report
