"""sensorveil benchmark BUNDLE|RUN_DIR: one table per format/backend, streams, and several sensors."""
import multiprocessing
import sys
from pathlib import Path

from sensorveil.benchmarks.peers import PEERS
from sensorveil.cli.common import UsageError, positive_int, write_json


def cmd_streams(args) -> int:
    """benchmark --streams N: N sensors into one runtime, aggregate FPS and latency per stream count."""
    from sensorveil.benchmarks.formats import is_run_dir
    from sensorveil.benchmarks.multi_stream import benchmark_streams, format_streams
    if args.formats is not None or is_run_dir(args.bundle):
        raise UsageError("--streams measures one bundle; it does not take a run directory or --formats")
    source = args.source or "synthetic-depth"
    result = benchmark_streams(args.bundle, source, args.streams, rounds=min(args.frames, 200),
                               backend="auto" if args.backend == "all" else args.backend,
                               log=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_streams(result))
    write_json(result, args.json)
    return 0


def cmd_contend(args) -> int:
    """benchmark --contend N: each cpu_policy quiet and beside N busy processes, side by side."""
    from sensorveil.benchmarks.contention import benchmark_contention, format_contention
    from sensorveil.benchmarks.formats import is_run_dir
    if args.formats is not None or args.streams is not None or is_run_dir(args.bundle):
        raise UsageError("--contend measures one bundle; it does not take a run directory, --formats or --streams")
    result = benchmark_contention(args.bundle, args.contend, source=args.source or "synthetic-depth",
                                  frames=args.frames, backend="auto" if args.backend == "all" else args.backend,
                                  log=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_contention(result))
    write_json(result, args.json)
    return 0


def cmd_benchmark(args) -> int:
    # --formats exports (torch, JAX under litert-torch): no library may fork after their thread pools start
    if multiprocessing.get_start_method(allow_none=True) is None:
        multiprocessing.set_start_method("spawn")
    if args.contend is not None:
        return cmd_contend(args)
    if args.streams is not None:
        return cmd_streams(args)
    from sensorveil.benchmarks.formats import benchmark_formats, is_run_dir
    from sensorveil.benchmarks.report import format_summary, write_report
    from sensorveil.benchmarks.stream_bench import format_estimates
    if args.formats is not None and not is_run_dir(args.bundle):
        raise UsageError(f"--formats exports a training run to each format; {args.bundle} is not a run directory "
                         "(a bundle is benchmarked as it is, one row per backend)")
    if args.attacker_epochs < 0:
        raise UsageError("--attacker-epochs takes 0 (use the manifest's figures) or more")
    if args.device_report is not None:
        name_device_report(args)
    if args.versus is not None and not (args.source and Path(args.source).is_file()):
        raise UsageError(f"--versus {args.versus} runs {args.versus} on the frames the stream runs: it needs "
                         f"--source set to a video file (got {args.source!r})")
    result = benchmark_formats(args.bundle, formats=args.formats, bundles_dir=args.bundles, iters=args.frames,
                               attacker_epochs=args.attacker_epochs, source=args.source, stream_frames=args.frames,
                               backend=args.backend, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_summary(result))    # its footer names each backend that ran, why, and each that did not
    for row in result["rows"]:
        if row.get("stream_fps"):
            print(stream_line(args.source, row))
    if args.versus is not None:
        print_versus(args, result)
    if args.json:
        stem = Path(args.json).with_suffix("")
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_report(result, json_path=args.json)
        # measured rows and the ESTIMATES table stay apart in the Markdown report
        measured = {key: value for key, value in result.items() if key != "estimates"}
        written = write_report(measured, markdown_path=f"{stem}.md", plot_path=f"{stem}.png")
        with open(f"{stem}.md", "a", encoding="utf-8") as markdown:
            markdown.write("\n" + format_estimates(result))
        print(f"wrote {args.json} (every figure), {stem}.md" + (f", {stem}.png" if "plot" in written else
              f"; no {stem}.png: {written.get('plot_skipped', 'the plot was not drawn')}"))
    return 0


def name_device_report(args) -> None:
    """--device-report DIR: every backend the bundle carries, the report named after the detected device
    (DIR/DEVICE-YYYYmmdd-HHMMSS.json, .md beside it): what a board owner runs and sends back."""
    from sensorveil.benchmarks.stream_bench import default_report_path, detected_device
    if args.json is not None:
        raise UsageError("--device-report names the report itself; drop --json")
    Path(args.device_report).mkdir(parents=True, exist_ok=True)
    args.json = str(default_report_path(args.device_report))
    print(f"device: {detected_device()['name']}  report: {args.json}", flush=True)


def print_versus(args, result: dict) -> None:
    """--versus deface: the peer on the stream's own frames, and each stream row as a multiple of it."""
    from sensorveil.benchmarks.peers import deface_cpu_per_frame, times_peer, versus_line
    print(f"measuring {args.versus} on {args.frames} frames of {args.source} ...", file=sys.stderr, flush=True)
    peer = deface_cpu_per_frame(args.source, frames=args.frames)
    result["versus"] = peer
    for row in result["rows"]:
        if row.get("stream_cpu_ms_per_frame"):
            row[f"times_{args.versus}"] = times_peer(row["stream_cpu_ms_per_frame"], peer)
            print(versus_line(row, peer))


def stream_line(source: str, row: dict) -> str:
    """The end-to-end figure beside the model's own: the same privatizer and threads, same run."""
    threads = row.get("stream_model_threads") or "default"
    ahead = "reading ahead" if row.get("stream_prepared_ahead") else "one frame at a time"
    line = (f"end to end on {source}: {row['format']} {row['precision']} {row['stream_fps']:,.1f} FPS "
            f"({ahead}, model threads: {threads})")
    if row.get("stream_cpu_ms_per_frame"):   # every thread's CPU: what the pipeline costs the board
        line += (f", {row['stream_cpu_ms_per_frame']:.1f} CPU ms per frame "
                 f"({1000 / row['stream_cpu_ms_per_frame']:,.1f} frames per CPU-second)")
    if row.get("stream_vs_model"):
        line += (f" = {row['stream_vs_model']:.2f}x the model alone with the same threads "
                 f"({row['stream_model_alone_fps']:,.1f} calls/s)")
    if row.get("stream_preprocessor") == "person-crops":   # a frame is a batch of crops plus finding people
        line += "; a camera frame runs the detector, pastes every person and calls the model on the crops of " \
                "people new to the tracker, so the table's per-crop FPS is no bound on it"
    elif row.get("fps"):   # the table's FPS column: 1000 / the mean call, like stream_fps (frames / wall time)
        line += f", {row['stream_fps'] / row['fps']:.2f}x the table's FPS ({row['fps']:,.0f}, default threads)"
    return line


def add_parser(verbs) -> None:
    p = verbs.add_parser("benchmark", help="one table: status, size, privacy, latency and FPS per format/backend")
    p.add_argument("bundle", metavar="BUNDLE|RUN_DIR", help="a bundle (one row per backend), or a training run "
                   "with --formats (exported to each format and precision, one row each)")
    p.add_argument("--formats", default=None, metavar="all|LIST",
                   help="RUN_DIR: export to these formats (all, or e.g. onnx,tflite, or onnx:int8,tflite:fp16) "
                   "and benchmark each")
    p.add_argument("--bundles", default=None, metavar="DIR",
                   help="--formats: where the exported bundles go (default bundles/RUN-formats)")
    p.add_argument("--attacker-epochs", type=int, default=3,
                   help="epochs of the probing attackers run on each artefact (default 3, quick; evaluate uses "
                        "20); 0: show the manifest's figures instead")
    p.add_argument("--backend", default="all", help="a backend name or 'all' the bundle carries")
    p.add_argument("--frames", type=positive_int, default=500,
                   help="timed iterations (and stream frames with --source)")
    p.add_argument("--source", default=None, help="also measure end-to-end stream FPS on this source "
                   "(camera:N, video file, kinect, k4a, depthdir:PATH, npy:PATH, synthetic-depth)")
    p.add_argument("--streams", type=positive_int, default=None, metavar="N",
                   help="N copies of --source (default synthetic-depth) into one runtime, batched: aggregate FPS "
                        "and p95 latency for 1, 2, 4, ... N streams (how many sensors one board serves)")
    p.add_argument("--contend", type=positive_int, default=None, metavar="N",
                   help="run N busy-loop processes beside a stream of --source (default synthetic-depth): FPS and "
                        "CPU-ms per frame quiet and contended, for each cpu_policy (shared, dedicated)")
    p.add_argument("--versus", default=None, choices=PEERS,
                   help="with --source VIDEO: also run this peer on the same frames and print each stream's frames "
                        "per CPU-second as a multiple of its (pip install 'sensorveil[peers]' and deface)")
    p.add_argument("--json", default=None, help="write JSON (+ .md table and .png plot beside it)")
    p.add_argument("--device-report", default=None, metavar="DIR",
                   help="the board owner's report: the JSON (+ .md) goes to DIR/DEVICE-YYYYmmdd-HHMMSS.json, "
                        "named after the detected device (with --backend all, the default: every backend)")
    p.set_defaults(func=cmd_benchmark)
