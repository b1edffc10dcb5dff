"""`sensorveil preview`: raw | privatized | difference side by side, with FPS and latency.

Window mode (a display and an OpenCV build with GUI support): keys
    p or space   pause / resume
    v            switch view: raw|privatized|difference -> raw|privatized -> privatized only
    q or Esc     quit
Headless mode (``--headless --out FILE.mp4``) writes the three-panel view of every frame to the
video and a contact sheet of evenly spaced views to ``FILE.png``, so the demo runs on a board
without a display and in tests.

The panels show the model's input (the crop the bundle sees, in sensor units) and its
privatized output; depth frames are colour-mapped (0 mm, no reading, in black), camera frames
are grey. A camera bundle (manifest ``camera``: people crops) shows whole frames instead: the raw
frame, the frame with every person's crop privatized and pasted back, and their difference.
The difference panel is |raw - privatized| over a quarter of the sensor range, colour-mapped.
"""
import collections
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.sinks import colorize, open_video_writer
from sensorveil.runtime.sources import Source, _cv2
from sensorveil.runtime.stream import Result, Stream, same_samples, sigterm_as_interrupt

VIEWS = (("raw", "privatized", "difference"), ("raw", "privatized"), ("privatized",))
STRIP_PX = 28            # label/overlay strip above the panels
SHEET_TILES = 12         # views on the contact sheet
WINDOW = "sensorveil preview"


class ViewComposer:
    """Builds the BGR view of one result: panels of ``panel_px`` height plus an overlay strip."""

    def __init__(self, privatizer: Privatizer, panel_px: int = 320):
        spec = privatizer.input_spec
        if len(spec.sample_shape) != 2:
            raise InputError(f"preview shows 2-D samples; this bundle's input has shape {spec.sample_shape}")
        self.low, self.high = spec.low, spec.high
        # a camera bundle privatizes the people of a frame: the panels show whole frames (see fit)
        self.camera = privatizer.pipeline.declared is not None
        height, width = spec.sample_shape
        self.panel_px = panel_px
        self.panel = (panel_px, _even(panel_px * width / height))   # (rows, cols)

    def fit(self, result: Result) -> None:
        """Camera bundles: panels take the aspect of the source's frames, known from the first one."""
        if self.camera:
            height, width = result.frame.data.shape[:2]
            self.panel = (self.panel_px, _even(self.panel_px * width / height))

    def size(self, view: tuple) -> "tuple[int, int]":
        """(width, height) of a composed view."""
        return self.panel[1] * len(view), self.panel[0] + STRIP_PX

    def compose(self, result: Result, view: tuple, fps: float, latency_ms: float, paused: bool = False) -> np.ndarray:
        cv2 = _cv2()
        if not same_samples(result.privatized, result.sample):
            raise InputError("preview needs privatized samples; this bundle emits "
                             f"{result.privatized.shape} outputs (load it with output='sample')")
        view_image = np.concatenate([self.panel_image(result, name) for name in view], axis=1)
        strip = np.zeros((STRIP_PX, view_image.shape[1], 3), dtype=np.uint8)
        for i, name in enumerate(view):
            cv2.putText(strip, name, (i * self.panel[1] + 6, 19), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1)
        status = f"{fps:5.1f} FPS  {latency_ms:5.1f} ms  #{result.frame.index}" + ("  PAUSED" if paused else "")
        cv2.putText(strip, status, (view_image.shape[1] - 8 * len(status) - 6, 19), cv2.FONT_HERSHEY_SIMPLEX,
                    0.45, (0, 255, 255), 1)
        return np.concatenate([strip, view_image], axis=0)

    def panel_image(self, result: Result, name: str) -> np.ndarray:
        """One BGR panel (raw, privatized or difference) at the panel size."""
        cv2 = _cv2()
        if self.camera:
            raw, privatized = result.frame.data, result.output
            if raw.ndim == 3:
                raw, privatized = (cv2.cvtColor(v, cv2.COLOR_BGR2GRAY) if name == "difference" else v
                                   for v in (raw, privatized))
            panel = (
                self._difference(raw, privatized) if name == "difference" else (raw if name == "raw" else privatized)
            )
            if panel.ndim == 2:
                panel = cv2.cvtColor(panel, cv2.COLOR_GRAY2BGR)
        elif name == "difference":
            panel = self._difference(result.sample, result.privatized)
        else:
            depth = result.frame.modality == "depth"  # colour-map depth; camera frames stay grey
            panel = colorize(result.sample if name == "raw" else result.privatized, self.low, self.high, depth)
        small = panel.shape[0] < self.panel[0] // 4  # 8x8 digits: keep pixels square and sharp
        return cv2.resize(
            panel, (self.panel[1], self.panel[0]), interpolation=cv2.INTER_NEAREST if small else cv2.INTER_LINEAR
        )

    def _difference(self, raw: np.ndarray, privatized: np.ndarray) -> np.ndarray:
        cv2 = _cv2()
        diff = np.abs(raw.astype(np.float32) - privatized.astype(np.float32))
        scaled = np.clip(diff * (4.0 * 255.0 / (self.high - self.low)), 0, 255).astype(np.uint8)
        return cv2.applyColorMap(scaled, cv2.COLORMAP_INFERNO)


class ContactSheet:
    """Evenly spaced views of a stream of unknown length, in bounded memory.

    Keeps every ``step``-th view; when it holds twice the tiles it needs, it drops every other
    one and doubles ``step``. At the end it holds between ``tiles`` and ``2 * tiles`` evenly
    spaced views and lays out ``tiles`` of them.
    """

    def __init__(self, tiles: int = SHEET_TILES, tile_width: int = 480):
        self.tiles, self.tile_width, self.step, self.kept, self.seen = tiles, tile_width, 1, [], 0

    def add(self, view: np.ndarray) -> None:
        if self.seen % self.step == 0:
            cv2 = _cv2()
            scale = self.tile_width / view.shape[1]
            self.kept.append(
                cv2.resize(view, (self.tile_width, _even(view.shape[0] * scale)), interpolation=cv2.INTER_AREA)
            )
            if len(self.kept) >= 2 * self.tiles:
                self.kept, self.step = self.kept[::2], self.step * 2
        self.seen += 1

    def write(self, path: Path) -> "Path | None":
        if not self.kept:
            return None
        chosen = [self.kept[i] for i in np.linspace(0, len(self.kept) - 1, min(self.tiles, len(self.kept))).astype(int)]
        columns = 3
        blank = np.zeros_like(chosen[0])
        rows = [
            np.concatenate((chosen[i : i + columns] + [blank] * columns)[:columns], axis=1)
            for i in range(0, len(chosen), columns)
        ]
        if not _cv2().imwrite(str(path), np.concatenate(rows, axis=0)):
            raise InputError(f"could not write the contact sheet {path}")
        return path


def _even(value: float) -> int:
    """Video encoders want even frame sizes."""
    return max(2, int(round(value / 2)) * 2)


def preview(privatizer: Privatizer, source: Source, out: "str | Path | None" = None, headless: bool = False,
            frames: "int | None" = None, panel_px: int = 320, progress=None) -> dict:
    """Run the preview; returns the stream report plus what was written. ``progress``: an object
    with ``update(counters)`` (sensorveil.runtime.progress.Progress), called after each frame."""
    if headless and out is None:
        raise InputError("--headless needs --out FILE.mp4 (the view is written there)")
    composer = ViewComposer(privatizer, panel_px)
    stream = Stream(privatizer, source, frames=frames)
    writer = sheet = None
    if out is not None:
        out = Path(out)
        sheet = ContactSheet()
    window = None if headless else _open_window()
    state = {"view": 0, "paused": False, "quit": False}
    recent = collections.deque(maxlen=30)
    try:
        with sigterm_as_interrupt():  # Ctrl-C or SIGTERM: the video is finalised and the report kept
            for result in stream:
                recent.append(time.perf_counter())
                fps = (len(recent) - 1) / (recent[-1] - recent[0]) if len(recent) > 1 else 0.0
                latency = sum(result.timings_ms[stage] for stage in ("preprocess", "inference", "postprocess"))
                if progress is not None:
                    progress.update(stream.counters)
                if out is not None and writer is None:  # sized by the first frame (camera bundles)
                    composer.fit(result)
                    writer = open_video_writer(out, source.fps or 25.0, *composer.size(VIEWS[0]))
                elif window is not None and stream.counters.frames_out == 1:
                    composer.fit(result)
                if writer is not None:  # the file always carries the full three-panel view
                    full = composer.compose(result, VIEWS[0], fps, latency)
                    writer.write(full)
                    sheet.add(full)
                if window is not None:
                    _show(window, composer, result, fps, latency, state, None if source.live else source.fps)
                    if state["quit"]:
                        break
    except KeyboardInterrupt:
        pass
    finally:
        if progress is not None:
            progress.close(stream.counters)
        if out is not None and writer is None:  # no frame came: still an (empty) video file
            writer = open_video_writer(out, source.fps or 25.0, *composer.size(VIEWS[0]))
        if writer is not None:
            writer.release()
        if window is not None:
            window.destroyAllWindows()
    report = stream.report()
    if out is not None:
        report["video"] = str(out)
        report["video_size"] = list(composer.size(VIEWS[0]))
        written = sheet.write(out.with_suffix(".png"))
        report["contact_sheet"] = str(written) if written else None
    return report


NO_WINDOW = "; run with --headless --out FILE.mp4 (a video) or --web 8080 (a page in a browser) instead"


def _open_window():
    """OpenCV's window, or one line that says why there is none and what to run instead (OpenCV's own
    error ends in advice to rebuild it with cmake, which is not what a board owner should do)."""
    cv2 = _cv2()
    reason = window_missing(cv2)
    if reason is None:
        try:
            cv2.namedWindow(WINDOW, cv2.WINDOW_NORMAL)
            return cv2
        except cv2.error:
            reason = "OpenCV could not open a window here"
    raise BackendUnavailableError("no preview window: " + reason + NO_WINDOW)


def window_missing(cv2, environ=None, system: "str | None" = None) -> "str | None":
    """Why no window can open, known before trying (a Qt build aborts the process without a display)."""
    environ = os.environ if environ is None else environ
    build = cv2.getBuildInformation()
    if re.search(r"^\s*GUI:\s*NONE\s*$", build, re.MULTILINE):
        return "this OpenCV is built without GUI support (opencv-python-headless)"
    if (system or platform.system()) == "Linux" and not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")):
        return "no display (DISPLAY and WAYLAND_DISPLAY are unset)"
    return None


def _show(
    cv2, composer: ViewComposer, result: Result, fps: float, latency: float, state: dict, source_fps: "float | None"
) -> None:
    """Draw one result and handle keys; while paused, keep redrawing the same result."""
    delay_ms = max(1, int(1000 / source_fps)) if source_fps else 1
    while True:
        cv2.imshow(WINDOW, composer.compose(result, VIEWS[state["view"]], fps, latency, state["paused"]))
        key = cv2.waitKey(delay_ms if not state["paused"] else 50) & 0xFF
        if key in (ord("q"), 27):
            state["quit"] = True
            return
        if key in (ord("p"), ord(" ")):
            state["paused"] = not state["paused"]
        elif key == ord("v"):
            state["view"] = (state["view"] + 1) % len(VIEWS)
        if not state["paused"]:
            return
