"""Where privatized frames go. A sink receives ONLY the privatized output and the frame's
index and timestamp; the raw frame never reaches it.

    video:FILE.mp4 | FILE.mp4/.avi/.mkv   8-bit video (depth colour-mapped), for people to watch
    png:DIR                                one PNG per frame, lossless sensor units (16-bit for depth)
    npz:DIR                                one .npz per frame: output, index, timestamp (any dtype)
    udp://HOST:PORT                        datagrams, see :class:`UdpSink` (stdlib only)
    a Python callable                      :class:`CallbackSink`, called as fn(output, frame)

The network sink is UDP rather than ZeroMQ: it needs nothing beyond the standard library on the
board, and a lost datagram loses one frame instead of stalling the sensor loop. A frame larger
than one datagram is split into chunks; :class:`UdpReceiver` reassembles them and drops frames
with missing chunks. UDP is neither encrypted nor authenticated: send over a trusted link or a
VPN; what travels is already privatized.
"""
import socket
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from sensorveil.runtime.errors import InputError, SensorveilError
from sensorveil.runtime.preprocess import to_display
from sensorveil.runtime.sources import Frame, _cv2

SINK_FORMS = ("video:FILE.mp4", "FILE.mp4", "png:DIR", "npz:DIR", "udp://HOST:PORT")
VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".mov")


class SinkError(SensorveilError):
    """A frame could not be delivered; the stream counts it as dropped and goes on."""


class Sink:
    def write(self, output: np.ndarray, frame: Frame) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Sink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CallbackSink(Sink):
    def __init__(self, callback: Callable[[np.ndarray, Frame], None]):
        self.callback = callback

    def write(self, output: np.ndarray, frame: Frame) -> None:
        self.callback(output, frame)


def colorize(image: np.ndarray, low: float, high: float, depth: bool) -> np.ndarray:
    """Sensor units -> 8-bit BGR: depth through a colour map (0 mm, no reading, in black)."""
    cv2 = _cv2()
    gray = to_display(image, low, high)
    if not depth:
        return cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR) if gray.ndim == 2 else gray
    colored = cv2.applyColorMap(gray, cv2.COLORMAP_JET)
    colored[image == 0] = 0
    return colored


class VideoSink(Sink):
    """8-bit video of the privatized output (lossy: keep sensor units with png:/npz:)."""

    def __init__(self, path: Path, fps: "float | None", value_range: "tuple[float, float]", depth: bool):
        self.path, self.fps = Path(path), fps or 25.0
        self.value_range, self.depth = value_range, depth
        self.writer = None
        self.written = 0

    def write(self, output: np.ndarray, frame: Frame) -> None:
        image = (
            output if output.dtype == np.uint8 and output.ndim == 3 else colorize(output, *self.value_range, self.depth)
        )
        if self.writer is None:
            self.writer = open_video_writer(self.path, self.fps, image.shape[1], image.shape[0])
        self.writer.write(image)
        self.written += 1

    def close(self) -> None:
        """Release the writer, then confirm the file: a container that opens, announces every frame written
        and decodes its last one. OpenCV's writer reports no error (a full disk leaves a file with no
        decodable frame), so this is where a failed write is found: one SinkError."""
        if self.writer is None:
            return
        self.writer.release()
        self.writer = None
        held = decodable_frames(self.path)
        if held < self.written:
            raise SinkError("{}: {} frames written, the file holds {} decodable (a full disk or a failed write)"
                            .format(self.path, self.written, held))


def decodable_frames(path: Path) -> int:
    """Frames a video file announces, 0 unless its last one also decodes (bounded: one seek, one read)."""
    cv2 = _cv2()
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            return 0
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        if count <= 0:
            return 0
        capture.set(cv2.CAP_PROP_POS_FRAMES, count - 1)
        ok, _ = capture.read()
        return count if ok else 0
    finally:
        capture.release()


def open_video_writer(path: Path, fps: float, width: int, height: int):
    cv2 = _cv2()
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (int(width), int(height)))
    if not writer.isOpened():
        raise InputError(f"OpenCV cannot write video to {path}; expected a writable .mp4/.avi path")
    return writer


class FolderSink(Sink):
    """One file per frame, named by frame index: lossless sensor units."""

    def __init__(self, folder: Path, fmt: str):
        self.folder, self.fmt = Path(folder), fmt
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise SinkError(
                f"{fmt} sink: cannot use {self.folder} as a folder ({error.strerror}); expected a writable directory"
            ) from None

    def write(self, output: np.ndarray, frame: Frame) -> None:
        path = self.folder / f"{frame.index:08d}.{self.fmt}"
        if self.fmt == "npz":
            try:
                np.savez(path, output=output, index=frame.index, timestamp=frame.timestamp)
            except OSError as error:  # read-only folder, full disk: one SinkError, the stream counts it
                raise SinkError(f"could not write {path} ({error.strerror})") from None
            return
        if output.dtype not in (np.uint8, np.uint16):
            raise InputError(f"png sink takes uint8 or uint16 outputs, got {output.dtype}; use npz:DIR")
        if not _cv2().imwrite(str(path), output):
            raise SinkError(f"could not write {path}")


class UdpSink(Sink):
    """Each frame as datagrams of at most ``max_payload`` bytes of array data.

    Every datagram carries a header (network byte order, ``HEADER``): magic ``SVL1``, frame index,
    timestamp (s), chunk number, chunk count, the array's numpy dtype string (e.g. ``<u2``), its
    rank and up to 4 dimensions. The payload is the C-ordered array bytes of that chunk.
    """

    def __init__(self, host: str, port: int, max_payload: int = 60000):
        self.address = resolve_udp_address(host, port)  # once: not a DNS lookup per datagram
        self.max_payload = int(max_payload)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def write(self, output: np.ndarray, frame: Frame) -> None:
        if output.ndim > MAX_RANK:
            raise InputError(f"udp sink sends arrays of rank <= {MAX_RANK}, got shape {output.shape}")
        payload = np.ascontiguousarray(output).tobytes()
        chunks = max(1, -(-len(payload) // self.max_payload))
        shape = tuple(output.shape) + (0,) * (MAX_RANK - output.ndim)
        try:
            for chunk in range(chunks):
                header = HEADER.pack(
                    MAGIC, frame.index, frame.timestamp, chunk, chunks, output.dtype.str.encode(), output.ndim, *shape
                )
                body = payload[chunk * self.max_payload : (chunk + 1) * self.max_payload]
                self.socket.sendto(header + body, self.address)
        except OSError as error:
            raise SinkError(f"udp send to {self.address[0]}:{self.address[1]} failed: {error}") from None

    def close(self) -> None:
        self.socket.close()


def resolve_udp_address(host: str, port) -> "tuple[str, int]":
    """``host``, ``port`` -> the IPv4 (address, port) every datagram goes to; one InputError otherwise."""
    try:
        port = int(port)
    except (TypeError, ValueError):
        port = -1
    if not 1 <= port <= 65535:
        raise InputError(f"udp sink: port {port!r} is out of range; expected udp://HOST:PORT with PORT 1-65535")
    try:
        return socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4][:2]
    except (socket.gaierror, UnicodeError) as error:
        raise InputError(
            f"udp sink: cannot resolve host {host!r} ({error}); expected a name or IPv4 address of the receiver"
        ) from None


MAGIC = b"SVL1"
MAX_RANK = 4
HEADER = struct.Struct("!4sIdHH4sB4I")


class UdpReceiver:
    """The other end of :class:`UdpSink`: ``receive()`` -> (array, index, timestamp)."""

    def __init__(self, port: int, host: str = "0.0.0.0", timeout_s: float = 5.0):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((host, int(port)))
        self.socket.settimeout(timeout_s)
        self.port = self.socket.getsockname()[1]
        self.partial: "dict[int, dict[int, bytes]]" = {}

    def receive(self) -> "tuple[np.ndarray, int, float]":
        while True:
            packet, _ = self.socket.recvfrom(65535)
            magic, index, timestamp, chunk, chunks, dtype, rank, *shape = HEADER.unpack_from(packet)
            if magic != MAGIC:
                continue
            parts = self.partial.setdefault(index, {})
            parts[chunk] = packet[HEADER.size :]
            if len(parts) == chunks:
                del self.partial[index]
                # older incomplete frames will never complete once a newer one has
                self.partial = {k: v for k, v in self.partial.items() if k > index}
                data = b"".join(parts[i] for i in range(chunks))
                array = np.frombuffer(data, dtype=np.dtype(dtype.rstrip(b"\0").decode())).reshape(shape[:rank])
                return array, index, timestamp

    def close(self) -> None:
        self.socket.close()


def open_sink(
    target, fps: "float | None" = None, value_range: "tuple[float, float]" = (0.0, 255.0), depth: bool = False
) -> "Sink | None":
    """A sink from a URI (see the module docstring), a callable, or None for no sink."""
    if target is None or target == "":
        return None
    if callable(target):
        return CallbackSink(target)
    text = str(target)
    scheme, _, rest = text.partition(":")
    if text.startswith("udp://"):
        host, _, port = text[len("udp://") :].rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"sink {text!r}: expected udp://HOST:PORT")
        return UdpSink(host, int(port))
    if scheme in ("png", "npz") and rest:
        return FolderSink(Path(rest), scheme)
    if scheme == "video" and rest:
        return VideoSink(Path(rest), fps, value_range, depth)
    if Path(text).suffix.lower() in VIDEO_SUFFIXES:
        return VideoSink(Path(text), fps, value_range, depth)
    raise InputError(f"unknown sink {text!r}; expected one of: {', '.join(SINK_FORMS)}")
