"""OpenCV sources: cameras, video files, network streams (BGR uint8 frames)."""
import os
import sys
import time
from contextlib import contextmanager

from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.sources.base import (
    MAX_FRAME_PIXELS,
    BadFrame,
    Frame,
    Source,
    SourceDisconnected,
    _cv2,
    check_pixels,
)

# A damaged video: OpenCV's read() fails at the damage, and often reads on past it; when this many
# reads in a row fail, the file has ended (the stream then reports how many frames never came).
READS_PAST_DAMAGE = 5
# FFmpeg decodes with one thread per core by default. The stream already decodes in its own reader
# thread beside the model, so extra decoder threads only take the model's cores: on walkway.avi one
# decoder thread also spent less CPU per frame (0.35 against 0.45 core-ms on the 2-core development
# host) and left the other core to the model (docs/stream_plumbing.md). Cameras use their own capture
# backend and are not affected.
DECODER_THREADS = 1
# A network stream that accepts and never sends would hold FFmpeg's open or read for as long as the server
# likes; OpenCV (4.5.4+) ends each after this long, and the source reports a disconnect (Reconnecting's
# overall stall limit then bounds the whole wait).
NETWORK_TIMEOUT_S = 10.0


# -- OpenCV: cameras, video files, network streams ---------------------------------------
class OpenCVSource(Source):
    """camera:N, video files and network URLs through ``cv2.VideoCapture``."""

    def __init__(self, uri: str, target, live: bool, network_timeout_s: float = NETWORK_TIMEOUT_S):
        super().__init__(uri)
        self.target = target
        self.live = live
        self.capture = None
        self.network_timeout_s = network_timeout_s

    def open(self) -> None:
        cv2 = _cv2()
        self._check_camera_present()
        with quiet_opencv(cv2):      # a camera that is not there: OpenCV's own lines would bury ours
            self.capture = self._capture(cv2)
        self._opened_once = True
        if not self.capture.isOpened():
            self.capture.release()
            self.capture = None
            if self.live:
                raise SourceDisconnected(f"{self.uri}: OpenCV could not open it (no such camera, "
                                         "device busy, or stream unreachable)")
            raise InputError(f"{self.uri}: OpenCV could not decode this file; expected a video "
                             "file OpenCV's FFmpeg backend reads (avi, mp4, mkv, ...)")
        self.fps = self.capture.get(cv2.CAP_PROP_FPS) or None
        self._cv2 = cv2
        width, height = (int(self.capture.get(prop)) for prop in (cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT))
        if width * height > MAX_FRAME_PIXELS:
            self.close()
            raise InputError(f"{self.uri}: {width}x{height} frames exceed the cap of {MAX_FRAME_PIXELS:,} pixels; "
                             "expected a sensor stream (sources.MAX_FRAME_PIXELS)")
        if not self.live:
            # a container that does not know its length (raw MJPEG) reports 0 or a negative count: unknown
            count = int(self.capture.get(cv2.CAP_PROP_FRAME_COUNT))
            self.announced_frames = count if count > 0 else None
        self._after_damage = None

    def _check_camera_present(self) -> None:
        """camera:N on Linux: /dev/videoN must exist before OpenCV is asked to open it (OpenCV would try each of
        its capture backends, print a warning for each and fail only after seconds). At the first open a missing
        device is one BackendUnavailableError; later (a camera unplugged mid-stream) it is a disconnect, so the
        stream waits for it to come back as before."""
        if not (isinstance(self.target, int) and sys.platform.startswith("linux")):
            return
        node = "/dev/video{}".format(self.target)
        if os.path.exists(node):
            return
        if getattr(self, "_opened_once", False):
            raise SourceDisconnected(f"{self.uri}: {node} is gone (camera unplugged?)")
        present = sorted(name for name in os.listdir("/dev") if name.startswith("video")) if os.path.isdir("/dev") \
            else []
        raise BackendUnavailableError(f"{self.uri}: no camera at index {self.target} ({node} does not exist; "
                                      f"this machine has {', '.join('/dev/' + n for n in present) or 'no /dev/video*'}"
                                      "); expected a connected camera (camera:N opens /dev/videoN)")

    def _capture(self, cv2):
        """A capture for the target; files and network streams with FFmpeg's decoder on
        DECODER_THREADS threads where this OpenCV can set it (4.6+), as OpenCV opens them otherwise."""
        threads = getattr(cv2, "CAP_PROP_N_THREADS", None)
        timeouts = []
        if isinstance(self.target, str) and "://" in self.target and hasattr(cv2, "CAP_PROP_OPEN_TIMEOUT_MSEC"):
            milliseconds = int(self.network_timeout_s * 1000)     # a network stream: bounded open and read
            timeouts = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, milliseconds, cv2.CAP_PROP_READ_TIMEOUT_MSEC, milliseconds]
        if isinstance(self.target, str) and threads is not None:
            capture = cv2.VideoCapture(self.target, cv2.CAP_FFMPEG, [threads, DECODER_THREADS] + timeouts)
            if capture.isOpened():
                return capture
            capture.release()   # not FFmpeg's to read (a GStreamer URL, an image sequence): OpenCV picks
        if timeouts:
            return cv2.VideoCapture(self.target, cv2.CAP_ANY, timeouts)
        return cv2.VideoCapture(self.target)

    def read(self) -> "Frame | None":
        if self._after_damage is not None:   # read past a damaged spot, handed out after its BadFrame
            frame, self._after_damage = self._after_damage, None
            return frame
        ok, image = self.capture.read()
        if not ok:
            if self.live:
                raise SourceDisconnected(f"{self.uri}: no frame from OpenCV (camera or stream dropped)")
            return self._read_past_damage()
        return self._frame(image)

    def _frame(self, image) -> Frame:
        cv2 = self._cv2
        if image is None or image.size == 0:
            raise BadFrame(f"{self.uri}: empty frame; expected an HxWx3 uint8 image")
        check_pixels(image.shape, self.uri)
        if self.live:
            index, timestamp = self._next_index(), time.monotonic()
        else:   # the file's own frame number; its time at the file's nominal rate
            index = int(self.capture.get(cv2.CAP_PROP_POS_FRAMES)) - 1
            timestamp = index / self.fps if self.fps else self.capture.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
        return Frame(image, timestamp, index, "color" if image.ndim == 3 else "gray")

    def _read_past_damage(self) -> "Frame | None":
        """A file's read failed before the frame count it announced: OpenCV often reads on past damaged
        data. If it does, the failure is one bad frame (counted) and the next read returns what followed;
        if it does not, the file has ended and the stream reports the frames it never delivered."""
        position = int(self.capture.get(self._cv2.CAP_PROP_POS_FRAMES))
        if self.announced_frames is None or position >= self.announced_frames:
            return None
        for _ in range(READS_PAST_DAMAGE):
            ok, image = self.capture.read()
            if ok:
                self._after_damage = self._frame(image)
                raise BadFrame(f"{self.uri}: frame {position} of {self.announced_frames} could not be decoded "
                               "(damaged data); skipped")
        return None

    def close(self) -> None:
        if self.capture is not None:
            self.capture.release()
            self.capture = None


@contextmanager
def quiet_opencv(cv2):
    """OpenCV's log level set to silent for the duration (its own warnings about a capture that does not open),
    then put back."""
    logging = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging is None or not hasattr(logging, "getLogLevel"):
        yield
        return
    level = logging.getLogLevel()
    logging.setLogLevel(logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        logging.setLogLevel(level)
