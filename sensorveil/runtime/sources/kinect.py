"""Depth sensors: Kinect v2 through libfreenect2, Azure Kinect (live or a recording) through pyk4a."""
import time
from pathlib import Path

import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError
from sensorveil.runtime.sources.base import DEPTH_MAX_MM, BadFrame, Frame, Source, SourceDisconnected

KINECT_V2_TICK_S = 1e-4    # libfreenect2 frame timestamps count 0.1 ms ticks


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
