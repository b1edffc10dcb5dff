"""Stream sources by URI: every source yields :class:`Frame` objects in sensor units.

    camera:N                 a local camera through OpenCV (BGR uint8 frames)
    PATH.avi / .mp4 / ...    a video file through OpenCV (BGR uint8 frames, file timestamps)
    rtsp://... http(s)://... a network stream through OpenCV (live: reopened when it drops)
    kinect[:SERIAL]          Kinect v2 depth through libfreenect2's Python binding (pylibfreenect2)
    k4a[:N]                  Azure Kinect depth, live, through pyk4a (device index N, default 0)
    k4a:PATH.mkv             an Azure Kinect recording played back through pyk4a
    depthdir:PATH            a folder of 16-bit PNG depth frames (millimetres), in name order
    npy:PATH                 a .npy array of frames (N, ...) or one frame, memory-mapped
    synthetic-depth[:SEED]   SYNTHETIC Kinect-v2-like overhead depth of a person walking under a door

Depth frames are uint16 millimetres (0 = no reading); camera frames are uint8 BGR. A frame's
``timestamp`` is in seconds: the sensor's or the file's clock where it has one, the host's
monotonic clock otherwise. ``index`` is the sensor's or file's frame number where it has one,
so a gap between consecutive indices counts as dropped frames.

Failure modes, kept apart because the stream treats them differently:
* ``read()`` returns ``None``: a finite source (file, folder, recording) has ended.
* :class:`BadFrame` (an InputError): this one frame is unusable; the stream counts it and goes on.
* :class:`SourceDisconnected`: a live device stopped delivering; :class:`Reconnecting` closes
  it and reopens it with exponential back-off, and gives up with one clear error.
* BackendUnavailableError: the library or hardware a source needs is not on this machine.

OpenCV, pylibfreenect2 and pyk4a are imported inside the source that needs them, never at
module import, so the runtime still imports on a device that has none of them.
"""
import queue
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError, SensorveilError

SOURCE_FORMS = ("camera:N", "VIDEO_FILE", "rtsp://URL", "kinect[:SERIAL]", "k4a[:N]", "k4a:FILE.mkv",
                "depthdir:PATH", "npy:PATH", "synthetic-depth[:SEED]")
NETWORK_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://")
DEPTH_MAX_MM = 4500        # Kinect v2's and Azure Kinect NFOV's working range ends here
KINECT_V2_TICK_S = 1e-4    # libfreenect2 frame timestamps count 0.1 ms ticks
# Frames above this many pixels are refused (a bad frame), before decoding where the format allows:
# a small 12000x12000 16-bit PNG decodes to 288 MB, and a sensor stream has no business sending it.
# 16.7 MP covers 4K cameras (8.3 MP) and every depth sensor with room to spare.
MAX_FRAME_PIXELS = 4096 * 4096
# A damaged video: OpenCV's read() fails at the damage, and often reads on past it; when this many
# reads in a row fail, the file has ended (the stream then reports how many frames never came).
READS_PAST_DAMAGE = 5
# FFmpeg decodes with one thread per core by default. The stream already decodes in its own reader
# thread beside the model, so extra decoder threads only take the model's cores: on walkway.avi one
# decoder thread also spent less CPU per frame (0.35 against 0.45 core-ms on the 2-core development
# host) and left the other core to the model (docs/stream_plumbing.md). Cameras use their own capture
# backend and are not affected.
DECODER_THREADS = 1


@dataclass(frozen=True)
class Frame:
    data: np.ndarray      # sensor units: uint16 mm for depth, uint8 BGR for colour
    timestamp: float      # seconds
    index: int            # frame number (sensor's or file's where known)
    modality: str         # "depth", "color", "gray" or "array" (already in a bundle's units)


class SourceDisconnected(SensorveilError):
    """A live source stopped delivering frames (unplugged, network drop, device reset)."""


class BadFrame(InputError):
    """One frame could not be read or decoded; the stream counts it and reads the next."""


class Source:
    """Base class: ``open()``, ``read() -> Frame | None``, ``close()``; also a context manager
    and an iterator of frames. Subclasses set ``live`` (reopen on disconnect) and ``fps``."""

    live = False
    fps: "float | None" = None
    announced_frames: "int | None" = None   # how many frames a recorded source says it holds

    def __init__(self, uri: str):
        self.uri = uri
        self._count = 0

    def open(self) -> None:
        raise NotImplementedError

    def read(self) -> "Frame | None":
        raise NotImplementedError

    def close(self) -> None:
        pass

    def read_direct(self) -> "Frame | None":
        """``read()`` in the caller's thread, for a caller that runs its own reader thread; only
        :class:`Prefetching` differs (it skips its own thread)."""
        return self.read()

    def _next_index(self) -> int:
        self._count += 1
        return self._count - 1

    def __enter__(self) -> "Source":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[Frame]:
        frame = self.read()
        while frame is not None:
            yield frame
            frame = self.read()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"


def _cv2():
    try:
        import cv2
    except ImportError:
        raise BackendUnavailableError(
            "this source needs OpenCV: pip install opencv-python-headless "
            "(or pip install 'sensorveil[camera]')") from None
    return cv2


# -- OpenCV: cameras, video files, network streams ---------------------------------------
class OpenCVSource(Source):
    """camera:N, video files and network URLs through ``cv2.VideoCapture``."""

    def __init__(self, uri: str, target, live: bool):
        super().__init__(uri)
        self.target = target
        self.live = live
        self.capture = None

    def open(self) -> None:
        cv2 = _cv2()
        self.capture = self._capture(cv2)
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
            self.announced_frames = int(self.capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
        self._after_damage = None

    def _capture(self, cv2):
        """A capture for the target; files and network streams with FFmpeg's decoder on
        DECODER_THREADS threads where this OpenCV can set it (4.6+), as OpenCV opens them otherwise."""
        threads = getattr(cv2, "CAP_PROP_N_THREADS", None)
        if isinstance(self.target, str) and threads is not None:
            capture = cv2.VideoCapture(self.target, cv2.CAP_FFMPEG, [threads, DECODER_THREADS])
            if capture.isOpened():
                return capture
            capture.release()   # not FFmpeg's to read (a GStreamer URL, an image sequence): OpenCV picks
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


# -- Kinect v2 through libfreenect2 ------------------------------------------------------
class KinectV2Source(Source):
    """Kinect v2 depth (512x424 float mm from libfreenect2, delivered as uint16 mm)."""

    live = True
    fps = 30.0

    def __init__(self, uri: str, serial: "str | None" = None, timeout_s: float = 2.0):
        super().__init__(uri)
        self.serial = serial
        self.timeout_s = timeout_s
        self.device = self.listener = None

    def open(self) -> None:
        try:
            import pylibfreenect2 as freenect2
        except ImportError:
            raise BackendUnavailableError(
                "source 'kinect' needs libfreenect2 and its Python binding: build libfreenect2 "
                "(github.com/OpenKinect/libfreenect2), then pip install pylibfreenect2") from None
        context = freenect2.Freenect2()
        if context.enumerateDevices() == 0:
            raise SourceDisconnected("kinect: no Kinect v2 found on USB 3 (enumerateDevices() == 0)")
        serial = self.serial or context.getDeviceSerialNumber(0)
        self.device = context.openDevice(serial, pipeline=_fastest_freenect2_pipeline(freenect2))
        self.listener = freenect2.SyncMultiFrameListener(freenect2.FrameType.Depth)
        self.device.setIrAndDepthFrameListener(self.listener)
        self.device.startStreams(rgb=False, depth=True)
        self._context = context   # the device is only valid while its context lives

    def read(self) -> "Frame | None":
        # Poll rather than block: a blocking wait would hang forever on an unplugged device.
        deadline = time.monotonic() + self.timeout_s
        while not self.listener.hasNewFrame():
            if time.monotonic() > deadline:
                raise SourceDisconnected(f"kinect: no depth frame for {self.timeout_s:.1f} s")
            time.sleep(0.002)
        frames = self.listener.waitForNewFrame()
        try:
            depth = frames["depth"]
            millimetres = np.clip(depth.asarray(), 0, DEPTH_MAX_MM).astype(np.uint16)
            return Frame(millimetres, depth.timestamp * KINECT_V2_TICK_S, int(depth.sequence), "depth")
        finally:
            self.listener.release(frames)

    def close(self) -> None:
        if self.device is not None:
            try:
                self.device.stop()
                self.device.close()
            finally:
                self.device = None


def _fastest_freenect2_pipeline(freenect2):
    """GPU depth decoding where the binding was built with it, the CPU pipeline otherwise."""
    for name in ("CudaPacketPipeline", "OpenCLPacketPipeline", "OpenGLPacketPipeline"):
        if hasattr(freenect2, name):
            try:
                return getattr(freenect2, name)()
            except Exception:   # built in but no usable GPU/driver: try the next one
                continue
    return freenect2.CpuPacketPipeline()


# -- Azure Kinect through pyk4a ----------------------------------------------------------
def _pyk4a(uri: str):
    try:
        import pyk4a
    except ImportError:
        raise BackendUnavailableError(
            f"source {uri!r} needs the Azure Kinect Sensor SDK and pyk4a: install the SDK "
            "(libk4a), then pip install pyk4a") from None
    return pyk4a


class AzureKinectSource(Source):
    """Azure Kinect depth, live (device index) or from an .mkv recording (playback)."""

    def __init__(self, uri: str, device_id: int = 0, recording: "Path | None" = None):
        super().__init__(uri)
        self.device_id = device_id
        self.recording = recording
        self.live = recording is None
        self.fps = 30.0
        self.handle = None

    def open(self) -> None:
        pyk4a = _pyk4a(self.uri)
        if self.recording is not None:
            self.handle = pyk4a.PyK4APlayback(str(self.recording))
            self.handle.open()
            return
        config = pyk4a.Config(color_resolution=pyk4a.ColorResolution.OFF,
                              depth_mode=pyk4a.DepthMode.NFOV_UNBINNED,
                              camera_fps=pyk4a.FPS.FPS_30, synchronized_images_only=False)
        self.handle = pyk4a.PyK4A(config=config, device_id=self.device_id)
        try:
            self.handle.start()
        except pyk4a.K4AException as error:
            self.handle = None
            raise SourceDisconnected(f"{self.uri}: could not start Azure Kinect {self.device_id}: {error}") from None

    def read(self) -> "Frame | None":
        pyk4a = _pyk4a(self.uri)
        try:
            capture = (self.handle.get_next_capture() if self.recording is not None
                       else self.handle.get_capture(timeout=2000))
        except EOFError:
            return None                                        # end of the recording
        except pyk4a.K4AException as error:
            if self.live:
                raise SourceDisconnected(f"{self.uri}: {error}") from None
            raise BadFrame(f"{self.uri}: unreadable capture ({error})") from None
        if capture.depth is None:
            raise BadFrame(f"{self.uri}: capture without a depth image")
        # The device clock's frame period tells dropped frames apart from slow reads.
        timestamp = capture.depth_timestamp_usec / 1e6
        index = int(round(timestamp * self.fps))
        return Frame(np.asarray(capture.depth, dtype=np.uint16), timestamp, index, "depth")

    def close(self) -> None:
        if self.handle is not None:
            (self.handle.close if self.recording is not None else self.handle.stop)()
            self.handle = None


# -- recorded depth and arrays -----------------------------------------------------------
class RecordedSource(Source):
    """Frames stored at ``path``, numbered in storage order, timed at a nominal ``fps``."""

    def __init__(self, uri: str, path: Path, fps: float = 30.0):
        super().__init__(uri)
        self.path, self.fps = path, fps
        self.length = 0

    def read(self) -> "Frame | None":
        if self._count >= self.length:
            return None
        index = self._next_index()
        return Frame(self._load(index), index / self.fps, index, self.modality)

    def _load(self, index: int) -> np.ndarray:
        raise NotImplementedError


class DepthDirSource(RecordedSource):
    """A folder of 16-bit PNG depth frames in millimetres, read in file-name order."""

    modality = "depth"

    def open(self) -> None:
        if not self.path.is_dir():
            raise InputError(f"{self.uri}: {self.path} is not a folder; expected a folder of 16-bit PNG depth frames")
        self.files = sorted(self.path.glob("*.png"))
        if not self.files:
            raise InputError(f"{self.uri}: no .png files in {self.path}; expected 16-bit PNG depth frames (mm)")
        self.length, self._count = len(self.files), 0
        self.announced_frames = self.length

    def _load(self, index: int) -> np.ndarray:
        path = self.files[index]
        size = png_size(path)
        if size is not None:   # refused from its header, before a decoder allocates the pixels
            check_pixels(size, path.name)
        image = _cv2().imread(str(path), -1)   # -1 = IMREAD_UNCHANGED: keep 16 bits
        if image is None or image.ndim != 2 or image.dtype != np.uint16:
            found = "unreadable" if image is None else f"{image.dtype} {image.shape}"
            raise BadFrame(f"{path.name}: {found}; expected a single-channel 16-bit PNG (depth in mm)")
        return image


class NpySource(RecordedSource):
    """Frames stacked along axis 0 of a .npy file (one frame if it has a frame's rank)."""

    def open(self) -> None:
        if not self.path.is_file():
            raise InputError(f"{self.uri}: file not found; expected a .npy array of frames (N, ...)")
        try:
            # mmap: a long recording is not read into memory; no pickle, ever.
            self.frames = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except ValueError as error:
            raise InputError(f"{self.uri}: not a plain numeric .npy ({error})") from None
        if self.frames.ndim == 2:     # a single depth or grey frame
            self.frames = self.frames[None]
        if self.frames.ndim < 2 or len(self.frames) == 0 or self.frames[0].size == 0:
            raise InputError(f"{self.uri}: the array of shape {self.frames.shape} holds no frames; expected "
                             "(N, ...) frames with N >= 1, or one 2-D frame")
        if self.frames[0].size > MAX_FRAME_PIXELS * 4:   # 4: a colour frame's channels and then some
            raise InputError(f"{self.uri}: frames of shape {self.frames.shape[1:]} exceed the cap of "
                             f"{MAX_FRAME_PIXELS:,} pixels; expected a sensor stream (sources.MAX_FRAME_PIXELS)")
        self.modality = _array_modality(self.frames[0])
        self.length, self._count = len(self.frames), 0
        self.announced_frames = self.length

    def _load(self, index: int) -> np.ndarray:
        return np.asarray(self.frames[index])


def check_pixels(shape, what: str) -> None:
    """A BadFrame for a frame of more than MAX_FRAME_PIXELS pixels (height x width of ``shape``)."""
    height, width = int(shape[0]), int(shape[1])
    if height * width > MAX_FRAME_PIXELS:
        raise BadFrame(f"{what}: a {width}x{height} frame exceeds the cap of {MAX_FRAME_PIXELS:,} pixels; "
                       "refused (expected sensor-sized frames)")


def png_size(path: Path) -> "tuple[int, int] | None":
    """(height, width) from a PNG's IHDR chunk, without decoding; None if it is not a PNG."""
    try:
        with open(str(path), "rb") as handle:
            head = handle.read(24)
    except OSError:
        return None   # the decoder's own error names it
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big")


def _array_modality(frame: np.ndarray) -> str:
    if frame.dtype == np.uint16 and frame.ndim == 2:
        return "depth"
    if frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3:
        return "color"
    return "array"


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


# -- resilience --------------------------------------------------------------------------
class Reconnecting(Source):
    """Wraps a live source: on disconnect, close it and reopen with exponential back-off.

    Waits ``base_delay_s * 2**k`` (capped at ``max_delay_s``) before attempt k; after
    ``max_attempts`` failed reopenings in a row it raises BackendUnavailableError that names
    the source and the last reason. ``reconnects`` counts successful reopenings.
    """

    def __init__(self, inner: Source, max_attempts: int = 6, base_delay_s: float = 0.5,
                 max_delay_s: float = 8.0, sleep: Callable[[float], None] = time.sleep):
        super().__init__(inner.uri)
        self.inner = inner
        self.live = inner.live
        self.max_attempts, self.base_delay_s, self.max_delay_s = max_attempts, base_delay_s, max_delay_s
        self.sleep = sleep
        self.reconnects = 0

    @property
    def fps(self):
        return self.inner.fps

    @property
    def announced_frames(self):
        return self.inner.announced_frames

    def open(self) -> None:
        try:
            self.inner.open()
        except SourceDisconnected as error:
            self._reopen(error)

    def read(self) -> "Frame | None":
        try:
            return self.inner.read()
        except SourceDisconnected as error:
            self._reopen(error)
            self.reconnects += 1
            return self.read()

    def _reopen(self, reason: SourceDisconnected) -> None:
        for attempt in range(self.max_attempts):
            self.inner.close()
            self.sleep(min(self.base_delay_s * 2 ** attempt, self.max_delay_s))
            try:
                self.inner.open()
                return
            except SourceDisconnected as error:
                reason = error
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
    threads once, not twice (the second hop cost about 9% of the stream's frame rate)."""

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
    ``None`` from ``produce`` is the end of the source."""

    def __init__(self, produce, depth: int = 2, name: str = "sensorveil read-ahead"):
        self.produce = produce
        self.items = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()
        self.ended = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
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

    def stop(self) -> None:
        self.stopping.set()
        # the reader finishes the frame it is on; a read stuck in a driver is abandoned (daemon thread)
        self.thread.join(timeout=5.0)


class _ReaderFailed:
    def __init__(self, error: BaseException):
        self.error = error



# -- URI parsing -------------------------------------------------------------------------
def parse_source(uri: str, **options) -> Source:
    """The source a URI names (see the module docstring), not yet opened."""
    uri = str(uri).strip()
    scheme, _, rest = uri.partition(":")
    if scheme == "camera" and re.fullmatch(r"\d+", rest):
        return OpenCVSource(uri, int(rest), live=True)
    if uri.startswith(NETWORK_SCHEMES):
        return OpenCVSource(uri, uri, live=True)
    if scheme == "kinect":
        return KinectV2Source(uri, serial=rest or None)
    if scheme == "k4a":
        if rest and not re.fullmatch(r"\d+", rest):
            return _k4a_recording(uri, Path(rest))
        return AzureKinectSource(uri, device_id=int(rest or 0))
    if scheme == "depthdir" and rest:
        return DepthDirSource(uri, Path(rest), **options)
    if scheme == "npy" and rest:
        return NpySource(uri, Path(rest), **options)
    if scheme == "synthetic-depth":
        return SyntheticDepthSource(uri, seed=int(rest) if rest else None, **options)
    path = Path(uri)
    if path.is_file():
        return OpenCVSource(uri, str(path), live=False)
    raise InputError(f"unknown or missing source {uri!r}; expected one of: {', '.join(SOURCE_FORMS)} "
                     "(a video file must exist)")


def _k4a_recording(uri: str, path: Path) -> Source:
    if not path.is_file():
        raise InputError(f"{uri}: recording not found; expected k4a:N (a device) or k4a:FILE.mkv")
    return AzureKinectSource(uri, recording=path)


def open_source(uri: str, reconnect: bool = True, prefetch: bool = True, **options) -> Source:
    """Parse and open a source; live ones are wrapped in :class:`Reconnecting`, and every one in
    :class:`Prefetching` unless ``prefetch=False``."""
    source = parse_source(uri, **options)
    if reconnect and source.live:
        source = Reconnecting(source)
    if prefetch:
        source = Prefetching(source)
    source.open()
    return source
