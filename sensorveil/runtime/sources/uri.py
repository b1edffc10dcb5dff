"""Stream sources by URI: the source each URI names, parsed and opened.

    camera:N                 a local camera through OpenCV (BGR uint8 frames)
    PATH.avi / .mp4 / ...    a video file through OpenCV (BGR uint8 frames, file timestamps)
    rtsp://... http(s)://... a network stream through OpenCV (live: reopened when it drops)
    kinect[:SERIAL]          Kinect v2 depth through libfreenect2's Python binding (pylibfreenect2)
    k4a[:N]                  Azure Kinect depth, live, through pyk4a (device index N, default 0)
    k4a:PATH.mkv             an Azure Kinect recording played back through pyk4a
    depthdir:PATH            a folder of 16-bit PNG depth frames (millimetres), in name order
    npy:PATH                 a .npy array of frames (N, ...) or one frame, memory-mapped
    synthetic-depth[:SEED]   SYNTHETIC Kinect-v2-like overhead depth of a person walking under a door
"""
import re
from pathlib import Path

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.sources.base import Source
from sensorveil.runtime.sources.kinect import AzureKinectSource, KinectV2Source
from sensorveil.runtime.sources.recorded import DepthDirSource, NpySource
from sensorveil.runtime.sources.synthetic import SyntheticDepthSource
from sensorveil.runtime.sources.video import OpenCVSource
from sensorveil.runtime.sources.wrappers import Prefetching, Reconnecting

SOURCE_FORMS = ("camera:N", "VIDEO_FILE", "rtsp://URL", "kinect[:SERIAL]", "k4a[:N]", "k4a:FILE.mkv",
                "depthdir:PATH", "npy:PATH", "synthetic-depth[:SEED]")
NETWORK_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://")


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
