"""sensorveil run BUNDLE --source SOURCE: privatize a stream into a sink and report what happened."""
import sys

from sensorveil.cli.common import (
    SCENE_STILL_HELP,
    positive_int,
    print_stream_report,
    progress_for,
    scene_still_from,
    share,
    write_json,
)


def cmd_run(args) -> int:
    from sensorveil.runtime.preprocess import is_depth_spec
    from sensorveil.runtime.sinks import open_sink
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream, sigterm_as_interrupt
    privatizer = load_for_stream(args.bundle, backend=args.backend, threads=args.threads,
                                 scene_still=scene_still_from(args))
    print(f"bundle signature: {privatizer.signature['status']} ({privatizer.signature['detail']})")
    print(backend_line(privatizer))
    spec = privatizer.output_spec
    with open_source(args.source) as source:
        sink = open_sink(args.sink, fps=source.fps, value_range=(spec.low, spec.high), depth=is_depth_spec(spec))
        stream = Stream(privatizer, source, sink, frames=args.frames, depth_output=args.depth_output)
        progress = progress_for(source, args.frames)
        try:
            with sigterm_as_interrupt():   # systemd and docker stop with SIGTERM: end like Ctrl-C
                for _ in stream:
                    progress.update(stream.counters)
        except KeyboardInterrupt:   # an endless sensor stream ends here; its counters still matter
            pass
        finally:
            progress.close(stream.counters)
            sink_error = close_sink(sink)
    report = {**backend_fields(privatizer), **stream.report(), "sink_error": sink_error}
    print_stream_report(report)
    write_json(report, args.json)
    if sink_error:      # what the sink holds is not what the stream delivered: the run failed
        print(f"sensorveil run: error: {sink_error}", file=sys.stderr)
        return 1
    return stream_exit_code(report, args.max_bad_share, allow_partial=args.allow_partial)


def close_sink(sink) -> "str | None":
    """Close the sink and confirm what it wrote: None, or the SinkError's message."""
    from sensorveil.runtime.sinks import SinkError
    if sink is None:
        return None
    try:
        sink.close()
    except SinkError as error:
        return str(error)
    return None


def backend_fields(privatizer) -> dict:
    """The backend that ran and why it was chosen: the JSON report's 'backend' and 'backend_why'."""
    return {"backend": privatizer.backend_name, "backend_why": privatizer.backend_why}


def backend_line(privatizer) -> str:
    """One console line: "backend: litert (auto: edgetpu: model not compiled ...; running on the CPU)"."""
    return f"backend: {privatizer.backend_name} ({privatizer.backend_why})"


def stream_exit_code(report: dict, max_bad_share: float, allow_partial: bool = False) -> int:
    """1 when nothing left the device, when a file ended short of the frames it announced (a damaged
    source, whatever the share, unless ``allow_partial``), or when more than ``max_bad_share`` of the frames
    were bad, dropped or missing: a service manager must see a stream that silently delivers nothing, or a
    truncated recording, as failed."""
    delivered = report["frames_out"] - report.get("undelivered", 0)
    missing = report.get("frames_missing") or 0
    if missing and not allow_partial:
        print(f"sensorveil run: error: the source ended {missing} frames short of the {report.get('frames_announced')} "
              "it announced: a damaged or truncated file (--allow-partial if it may be partial)", file=sys.stderr)
        return 1
    lost = report["bad"] + report["dropped"] + missing
    share = lost / max(1, delivered + lost)
    if delivered <= 0:
        print("sensorveil run: error: no privatized frame was delivered" + (
            f" (first error: {report['errors'][0]})" if report.get("errors") else ""), file=sys.stderr)
        return 1
    if share > max_bad_share:
        print(f"sensorveil run: error: {share:.0%} of the frames were bad, dropped or missing ({report['bad']} bad, "
              f"{report['dropped']} dropped, {missing} missing; limit {max_bad_share:.0%}, --max-bad-share)",
              file=sys.stderr)
        return 1
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("run", help="privatize a sensor stream and send the output to a sink")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a[:N|:FILE.mkv], "
                   "depthdir:PATH, npy:PATH or synthetic-depth")
    p.add_argument("--sink", default=None, help="video:FILE.mp4, png:DIR, npz:DIR or udp://HOST:PORT (default: none)")
    p.add_argument(
        "--frames", type=positive_int, default=None, help="stop after N frames (default: until the source ends)"
    )
    p.add_argument("--backend", default="auto")
    p.add_argument("--scene-still", default=None, metavar="IMAGE", help=SCENE_STILL_HELP)
    p.add_argument(
        "--depth-output",
        default="patch",
        choices=("patch", "frame"),
        help="depth: emit the privatized 180x180 patch, or a full frame with only the patch valid",
    )
    p.add_argument("--json", default=None, help="write the stream report to this JSON file")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for the model (default: all cores but one, which reads and pre-processes the next frames)",
    )
    p.add_argument(
        "--max-bad-share",
        type=share,
        default=0.5,
        help="exit 1 when more than this share of frames was bad or dropped (default 0.5)",
    )
    p.add_argument("--allow-partial", action="store_true",
                   help="a file that ends short of the frames it announces is not an error (default: exit 1)")
    p.set_defaults(func=cmd_run)
