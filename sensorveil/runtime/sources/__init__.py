"""Stream sources by URI: every source yields :class:`Frame` objects in sensor units.

The URI forms are listed in ``sources.uri``, beside ``parse_source`` and ``open_source``.

Depth frames are uint16 millimetres (0 = no reading); camera frames are uint8 BGR. A frame's
``timestamp`` is in seconds: the sensor's or the file's clock where it has one, the host's
monotonic clock otherwise. ``index`` is the sensor's or file's frame number where it has one,
so a gap between consecutive indices counts as dropped frames.

One source family per module: ``base`` (Frame, Source, the errors and the frame-size cap; its
docstring lists the failure modes), ``video`` (OpenCV), ``kinect`` (Kinect v2, Azure Kinect),
``recorded`` (PNG depth folders, .npy arrays), ``synthetic`` (synthetic depth), ``wrappers``
(reconnecting, reading ahead) and ``uri`` (a URI to its source).

OpenCV, pylibfreenect2 and pyk4a are imported inside the source that needs them, never at
module import, so the runtime still imports on a device that has none of them.
"""
from sensorveil.runtime.sources.base import (
    DEPTH_MAX_MM,
    MAX_FRAME_PIXELS,
    BadFrame,
    Frame,
    Source,
    SourceDisconnected,
    _cv2,
    check_frame,
    check_pixels,
)
from sensorveil.runtime.sources.kinect import KINECT_V2_TICK_S, AzureKinectSource, KinectV2Source
from sensorveil.runtime.sources.recorded import DepthDirSource, NpySource, RecordedSource, png_size
from sensorveil.runtime.sources.synthetic import SyntheticDepthSource
from sensorveil.runtime.sources.uri import NETWORK_SCHEMES, SOURCE_FORMS, open_source, parse_source
from sensorveil.runtime.sources.video import DECODER_THREADS, READS_PAST_DAMAGE, OpenCVSource
from sensorveil.runtime.sources.wrappers import Prefetching, ReadAhead, Reconnecting

__all__ = [
    # base
    "Frame", "Source", "SourceDisconnected", "BadFrame", "check_frame", "check_pixels", "DEPTH_MAX_MM",
    "MAX_FRAME_PIXELS",
    "_cv2",   # OpenCV on demand, for preview, sinks and web_preview
    # video
    "OpenCVSource", "READS_PAST_DAMAGE", "DECODER_THREADS",
    # kinect
    "KinectV2Source", "AzureKinectSource", "KINECT_V2_TICK_S",
    # recorded
    "RecordedSource", "DepthDirSource", "NpySource", "png_size",
    # synthetic
    "SyntheticDepthSource",
    # wrappers
    "Reconnecting", "Prefetching", "ReadAhead",
    # uri
    "parse_source", "open_source", "SOURCE_FORMS", "NETWORK_SCHEMES",
]
