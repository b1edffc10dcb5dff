"""The one console script, `sensorveil`. Each verb imports what it needs when it runs, so the
runtime verbs work on a device that has numpy and one backend library and nothing else."""
import argparse
import json
import sys
from pathlib import Path

from sensorveil import __version__
from sensorveil.runtime.errors import SensorveilError


class UsageError(ValueError):
    """A wrong combination of arguments: one line on stderr and exit code 2, like argparse's own."""


def _write_json(data: dict, path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def _print_mapping(title: str, data: dict) -> None:
    print(title)
    for key, value in data.items():
        if isinstance(value, float):
            value = f"{value:.4f}"
        if not isinstance(value, (dict, list)):
            print(f"  {key:28s} {value}")


# -- verbs -------------------------------------------------------------------------------
def cmd_quickstart(args) -> int:
    if args.camera:
        from sensorveil.quickstart import camera_quickstart
        camera_quickstart(Path(args.out), Path(args.camera))
        return 0
    from sensorveil.quickstart import quickstart
    quickstart(Path(args.out), epochs=args.epochs)
    return 0


def cmd_train(args) -> int:
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.runs import read_run, train_run
    mechanism = mechanisms.get(args.mechanism)
    if args.hidden and not mechanism.multi_attribute:
        raise ValueError(f"--hidden applies to mechanisms that take several attributes (pass), not {args.mechanism}")
    settings = parse_settings(args.set)
    if args.substitutes is not None:
        settings["substitutes"] = args.substitutes
    if args.classifier_epochs is not None:   # a mechanism without fixed classifiers names its valid settings
        settings["classifier_epochs"] = args.classifier_epochs
    out = train_run(args.mechanism, args.dataset, data_path=args.data_path, useful=args.useful, private=args.private,
                    out=args.out, epochs=args.epochs, seed=args.seed, hidden=args.hidden, settings=settings,
                    attacker_epochs=args.attacker_epochs)
    run = read_run(out)
    _print_mapping(f"trained {args.mechanism} on {args.dataset} -> {out}", {**run["reference"], **run["metrics"]})
    print("  " + epochs_line(run, args.attacker_epochs))
    warning = threshold_warning(run)
    if warning:
        print(f"sensorveil train: warning: {warning}", file=sys.stderr)
    return 0


def epochs_line(run: dict, attacker_epochs: int) -> str:
    """What each network was trained for: --epochs is the mechanism's own networks only."""
    config = run.get("config") or {}
    parts = [f"mechanism networks {config.get('epochs', 'default')} (--epochs)"]
    if "classifier_epochs" in config:
        parts.append(f"fixed D_y/D_z {config['classifier_epochs']} (--classifier-epochs)")
    parts.append(f"probing attackers {attacker_epochs} (--attacker-epochs)")
    return "epochs: " + ", ".join(parts)


def threshold_warning(run: dict) -> "str | None":
    """PR-GAN section 6.4 keeps the most private setting that holds the utility threshold; when none
    does, the run keeps the most useful one and its figures are not at the promised utility."""
    selection = run.get("selection") or {}
    if selection.get("threshold_met") is not False:
        return None
    threshold = (run.get("reference") or {}).get("utility_threshold", run.get("config", {}).get("utility_threshold"))
    sweep, chosen = selection.get("sweep") or [], selection.get("chosen")
    achieved = sweep[chosen].get("val_acc_useful") if isinstance(chosen, int) and chosen < len(sweep) else None
    reached = f"reached {achieved:.3f}" if isinstance(achieved, float) else "was not reached"
    useful = run["useful"] if isinstance(run["useful"], str) else ", ".join(run["useful"])
    return (f"the utility threshold was not met: Acc(D_y) on '{useful}' "
            f"{reached} against {threshold} on the held-out split; the run keeps the most useful setting, so "
            "its privacy figures are for a mechanism below the utility you asked for (more --epochs, more data, "
            "or --set utility_threshold=LOWER)")


def positive_int(text: str) -> int:
    """argparse type: a count of 1 or more (a usage error, exit 2, otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def parse_settings(pairs) -> dict:
    """--set KEY=VALUE ... -> {KEY: "VALUE"}; the mechanism converts each to its setting's type."""
    settings = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def cmd_evaluate(args) -> int:
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.audit import format_audit, write_report
    result = audit_path(args.path, backend=args.backend, seeds=args.seeds, attacker_epochs=args.attacker_epochs)
    title = (f"audit of {result['source']} ({result['mechanism']}"
             + (f", {result['backend']}" if "backend" in result else ", trained model") + ")")
    print(format_audit(result, title))
    if "protocol_acc_private" in result:
        print(f"  paper protocol (the defender's fixed classifiers): D_z {result['protocol_acc_private']:.1%}, "
              f"D_y {result['protocol_acc_useful']:.1%}")
    _write_json(result, args.json)
    if args.report:
        print(f"wrote {write_report(result, title, args.report)} (+ .png)")
    return 0


def cmd_export(args) -> int:
    from sensorveil.export import export_run
    out = export_run(args.run_dir, args.format, args.out, precision=args.precision,
                     include_samples=not args.index_only, target=args.target, calibration=args.calibration,
                     int8_check=not args.skip_int8_privacy_check, attacker_epochs=args.int8_attacker_epochs,
                     sign_key=args.sign, sensor_units=args.units == "sensor", serial=args.serial)
    manifest = json.loads((out / "manifest.json").read_text())
    units = [stage for stage in manifest.get("pipeline", []) if "units" in stage]
    if units:
        print(f"units: {units[0]['units']} ({units[0]['units_note']})")
    for record in manifest.get("validation", []):
        print(f"validation {record['backend']} ({record.get('precision', '')}): {record['status']} "
              + _validation_detail(record))
    edgetpu = manifest["artifacts"].get("edgetpu", {}).get("graphs", {})
    uncompiled = [entry["compile_command"] for entry in edgetpu.values() if not entry.get("compiled")]
    if uncompiled:
        print("not yet compiled for the Edge TPU; on an x86-64 Linux host with edgetpu_compiler run:\n  "
              + "\n  ".join(uncompiled) + "\nthen re-run the export there, or copy the compiled file in and re-export")
    print(f"bundle written to {out}" + (f", signed with {args.sign} (manifest.sig)" if args.sign else ""))
    return 0


def cmd_keys(args) -> int:
    from sensorveil.export.signing import generate_key_pair
    private_path, public_path = generate_key_pair(args.out)
    print(f"wrote {private_path} (private: sign with `sensorveil export ... --sign {private_path}`; keep it off "
          f"the devices)\nwrote {public_path} (public: give it to devices as trusted_keys=[...] or "
          "SENSORVEIL_TRUSTED_KEYS)")
    return 0


def _validation_detail(record: dict) -> str:
    if "shift" in record:
        return (f"(audit over {record['seeds']} seeds, int8 - fp32: neural attacker on the private attribute "
                f"{record['shift']['probing_acc_private']:+.3f}, utility {record['shift']['probing_acc_useful']:+.3f}; "
                "fails when any attacker family rises above the fp32 95% interval)")
    if "max_abs_diff" in record:
        return (f"(max |diff| {record['max_abs_diff']:.2e}, {record['relative_diff']:.2e} of the output range; "
                f"tolerance {record['tolerance']})")
    return f"({record.get('reason', '')})"


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
    _write_json(result, args.json)
    return 0


def cmd_benchmark(args) -> int:
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
    result = benchmark_formats(args.bundle, formats=args.formats, bundles_dir=args.bundles, iters=args.frames,
                               attacker_epochs=args.attacker_epochs, source=args.source, stream_frames=args.frames,
                               backend=args.backend, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_summary(result))
    for skipped in result.get("skipped", []):
        print(f"skipped {skipped['backend']}: {skipped['reason']}")
    for row in result["rows"]:
        if row.get("stream_fps"):
            print(stream_line(args.source, row))
    if args.json:
        stem = Path(args.json).with_suffix("")
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_report(result, json_path=args.json)
        # measured rows and the ESTIMATES table stay apart in the Markdown report
        measured = {key: value for key, value in result.items() if key != "estimates"}
        write_report(measured, markdown_path=f"{stem}.md", plot_path=f"{stem}.png")
        with open(f"{stem}.md", "a", encoding="utf-8") as markdown:
            markdown.write("\n" + format_estimates(result))
        print(f"wrote {args.json} (every figure), {stem}.md, {stem}.png")
    return 0


def cmd_devices(args) -> int:
    from sensorveil import devices
    if args.action == "list":
        for name in devices.list_profiles():
            profile = devices.load_profile(name)
            print(f"{name:18s} {profile['backend']:12s} {profile['precision']:5s} {profile['description']}")
        return 0
    if args.action == "detect":
        evidence = devices.detection_evidence()
        _print_mapping("evidence", {key: (", ".join(value) if isinstance(value, list) else value) or "-"
                                    for key, value in evidence.items()})
        matches = devices.detect(evidence)
        for match in matches:
            print(f"detected {match['name']} (by {', '.join(match['matched_by'])}); "
                  f"set-up script: {devices.setup_script(match['name'])}")
        if not matches:
            print("no device profile matches this machine")
        return 0
    if not args.bundle or not args.device:
        raise UsageError("devices check needs a bundle and a device: sensorveil devices check BUNDLE --device NAME")
    from sensorveil.export.device_check import check_bundle
    report = check_bundle(args.bundle, args.device)
    print(f"{args.device}: {report['file']} ({report['backend']}, {report['precision']}), "
          f"{sum(report['operator_counts'].values())} operators of {len(report['operator_counts'])} types")
    for problem in report["problems"]:
        print(f"  problem: {problem}")
    if report.get("note"):
        print(f"  note: {report['note']}")
    print("compatible" if report["compatible"] else "NOT compatible")
    _write_json(report, args.json)
    return 0 if report["compatible"] else 1


FRACTION_KEYS = ("model_ms_p50", "runtime_added_ms_p50", "units_ms_p50", "runtime_added_fraction", "units_fraction")


def _print_stream_report(report: dict) -> None:
    _print_mapping(f"stream {report['source']}", {key: value for key, value in report.items()
                                                  if key not in FRACTION_KEYS})
    for stage, figures in report.get("stages_ms", {}).items():
        print(f"  {stage + '_ms (mean/p50/p95)':28s} {figures['mean']:.3f} / {figures['p50']:.3f} / {figures['p95']:.3f}")
    for line in explain_overhead(report):
        print("  " + line)
    for error in report.get("errors", []):
        print(f"  bad frame: {error}")
    if report.get("frames_missing"):
        print(f"sensorveil: warning: the source announced {report['frames_announced']} frames and ended "
              f"{report['frames_missing']} short of that (a damaged or truncated file?)", file=sys.stderr)


def stream_line(source: str, row: dict) -> str:
    """The end-to-end figure beside the model's own: the same privatizer and threads, same run."""
    threads = row.get("stream_model_threads") or "default"
    ahead = "reading ahead" if row.get("stream_prepared_ahead") else "one frame at a time"
    line = (f"end to end on {source}: {row['format']} {row['precision']} {row['stream_fps']:,.1f} FPS "
            f"({ahead}, model threads: {threads})")
    if row.get("stream_cpu_ms_per_frame"):   # every thread's CPU: what the pipeline costs the board
        line += f", {row['stream_cpu_ms_per_frame']:.1f} CPU ms per frame"
    if row.get("stream_vs_model"):
        line += (f" = {row['stream_vs_model']:.2f}x the model alone with the same threads "
                 f"({row['stream_model_alone_fps']:,.1f} calls/s)")
    if row.get("runtime_p50_ms"):   # the table's FPS column: 1000 / p50 ms, the library's default threads
        line += f", {row['stream_fps'] * row['runtime_p50_ms'] / 1000:.2f}x the table's FPS"
    return line


def explain_overhead(report: dict) -> "list[str]":
    """The runtime's added time per frame in words: the JSON's *_fraction keys are ratios to the
    model's own time (8.9 means nine times the model's time, not 8.9 %)."""
    if report.get("runtime_added_fraction") is None:
        return []
    model = report["model_ms_p50"]
    return [f"model (backend) per frame, p50: {model:.3f} ms",
            f"runtime added per frame, p50:   {report['runtime_added_ms_p50']:.3f} ms = "
            f"{report['runtime_added_fraction']:.2f}x the model's time (runtime_added_fraction: preprocess + "
            "postprocess, i.e. frame-to-sample crop/resize, validation and unit mapping)",
            f"  of which the Privatizer's own: {report['units_ms_p50']:.3f} ms = {report['units_fraction']:.2f}x "
            "(units_fraction: validation and sensor<->model units, what a caller handing it samples pays)"] + (
            ["  preprocess ran in the read-ahead thread, beside the model: it costs CPU, not the frame rate, "
             "while it is the faster side"] if report.get("prepared_ahead") else [])


def cmd_run(args) -> int:
    from sensorveil.runtime.preprocess import is_depth_spec
    from sensorveil.runtime.sinks import open_sink
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream, sigterm_as_interrupt
    privatizer = load_for_stream(args.bundle, backend=args.backend, threads=args.threads)
    print(f"bundle signature: {privatizer.signature['status']} ({privatizer.signature['detail']})")
    spec = privatizer.output_spec
    with open_source(args.source) as source:
        sink = open_sink(args.sink, fps=source.fps, value_range=(spec.low, spec.high), depth=is_depth_spec(spec))
        stream = Stream(privatizer, source, sink, frames=args.frames, depth_output=args.depth_output)
        progress = _progress(source, args.frames)
        try:
            with sigterm_as_interrupt():   # systemd and docker stop with SIGTERM: end like Ctrl-C
                for _ in stream:
                    progress.update(stream.counters)
        except KeyboardInterrupt:   # an endless sensor stream ends here; its counters still matter
            pass
        finally:
            progress.close(stream.counters)
            if sink is not None:
                sink.close()
    report = stream.report()
    _print_stream_report(report)
    _write_json(report, args.json)
    return stream_exit_code(report, args.max_bad_share)


def stream_exit_code(report: dict, max_bad_share: float) -> int:
    """1 when nothing left the device, or when more than ``max_bad_share`` of the frames were bad or
    dropped: a service manager must see a stream that silently delivers nothing as failed."""
    delivered = report["frames_out"] - report.get("undelivered", 0)
    lost = report["bad"] + report["dropped"]
    share = lost / max(1, report["frames_out"] + report["bad"] + report["dropped"] - report.get("undelivered", 0))
    if delivered <= 0:
        print("sensorveil run: error: no privatized frame was delivered" + (
            f" (first error: {report['errors'][0]})" if report.get("errors") else ""), file=sys.stderr)
        return 1
    if share > max_bad_share:
        print(f"sensorveil run: error: {share:.0%} of the frames were bad or dropped (limit {max_bad_share:.0%}, "
              "--max-bad-share)", file=sys.stderr)
        return 1
    return 0


def _progress(source, frames):
    """A progress line on stderr: frames done of the file's length (or of --frames)."""
    from sensorveil.runtime.progress import Progress, expected_frames
    total = expected_frames(source)
    if frames is not None:
        total = min(total, frames) if total else frames
    return Progress(total)


def cmd_preview(args) -> int:
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import load_for_stream
    if args.web is not None and (args.headless or args.out):
        raise UsageError("--web serves the preview as a page; it does not take --headless or --out")
    if args.web is None and (args.no_raw or args.loop):
        raise UsageError("--no-raw and --loop apply to the web preview (--web [HOST:]PORT)")
    privatizer = load_for_stream(args.bundle, backend=args.backend, threads=args.threads)
    if args.web is not None:
        from sensorveil.runtime.web_preview import serve
        open_source(args.source).close()   # a missing file or camera is one clear error before serving
        report = serve(privatizer, lambda: open_source(args.source), args.web, frames=args.frames,
                       raw=not args.no_raw, loop=args.loop)
        _print_stream_report(report)
        return 0
    from sensorveil.runtime.preview import preview
    with open_source(args.source) as source:
        report = preview(privatizer, source, out=args.out, headless=args.headless, frames=args.frames,
                         progress=_progress(source, args.frames) if args.headless else None)
    _print_stream_report(report)
    if args.out:
        print(f"wrote {report['video']} ({report['frames_out']} frames, {report['video_size'][0]}x"
              f"{report['video_size'][1]}) and {report['contact_sheet']}")
    return 0


# -- parser ------------------------------------------------------------------------------
def _mechanism_names() -> tuple:
    from sensorveil.sdk import mechanisms   # the registry's names, read without importing torch
    return mechanisms.names()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorveil", description="Privacy at the sensor: train, export, run, benchmark and preview privatizing mechanisms.")
    parser.add_argument("--version", action="version", version=f"sensorveil {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")   # required=: Python 3.7+, checked in main

    p = verbs.add_parser("quickstart", help="train PR-GAN on digits, attack it, export, run and benchmark it")
    p.add_argument("--out", default="sensorveil-out", help="where runs, bundles and reports go")
    p.add_argument("--epochs", type=positive_int, default=None, help="generator epochs (default: the config's)")
    p.add_argument("--camera", metavar="CLIP", default=None,
                   help="instead: PASS on the people of a still camera clip (e.g. ../shared/media/walkway.avi), "
                        "audited and previewed raw beside privatized")
    p.set_defaults(func=cmd_quickstart)

    p = verbs.add_parser("train", help="train a privatizing mechanism on a dataset")
    p.add_argument("mechanism", help=f"one of: {', '.join(_mechanism_names())}")
    p.add_argument("--dataset", required=True, help="digits, ujiindoorloc, synthetic-depth or npz")
    p.add_argument("--data-path", default=None, help="path to the dataset's files (ujiindoorloc zip, npz)")
    p.add_argument("--private", nargs="+", default=None, help="private attribute(s) to hide")
    p.add_argument("--useful", nargs="+", default=None, help="useful attribute(s) to keep")
    p.add_argument("--out", default=None, help="run directory (default runs/MECHANISM-DATASET)")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="epochs of the mechanism's own networks only (PR-GAN: each generator of the margin "
                        "sweep; PASS: f and g); default: the mechanism's. The fixed classifiers and the "
                        "attackers have their own flags below")
    p.add_argument("--classifier-epochs", type=positive_int, default=None,
                   help="PR-GAN and its baselines: epochs of the fixed D_y and D_z (default 20)")
    p.add_argument("--attacker-epochs", type=positive_int, default=20,
                   help="epochs of each probing attacker that scores the run (default 20; fewer is faster "
                        "but a weaker attacker makes privacy look better than it is)")
    p.add_argument("--seed", type=int, default=0, help="training seed (the deployed mechanism draws its own)")
    p.add_argument("--hidden", nargs="+", default=None,
                   help="pass: hidden useful attribute(s), never seen in training, scored in mNAG (eq. 14)")
    p.add_argument("--substitutes", type=int, default=None,
                   help="pass: substitute bank size (default 4096, capped at the training split)")
    p.add_argument("--set", nargs="+", default=None, metavar="KEY=VALUE",
                   help="mechanism settings (fields of its config, e.g. --set tau=0.05 for pass); "
                        "an unknown key names the valid ones")
    p.set_defaults(func=cmd_train)

    p = verbs.add_parser("evaluate", help="audit a run or a bundle: attackers of several families, over seeds, "
                                          "with 95%% intervals")
    p.add_argument("path", help="RUN_DIR or BUNDLE")
    p.add_argument("--backend", default="auto", help="runtime backend for a bundle")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.add_argument("--attacker-epochs", type=positive_int, default=20, help="training epochs of each neural attacker")
    p.add_argument("--seeds", type=int, default=3, help="repeats of every attacker (the 95%% intervals need >= 2)")
    p.add_argument("--report", default=None, metavar="FILE.md", help="also write a markdown report and its plot")
    p.set_defaults(func=cmd_evaluate)

    p = verbs.add_parser("export", help="turn a run into a validated bundle")
    p.add_argument("run_dir")
    p.add_argument("--format", default=None, choices=("onnx", "tflite", "openvino", "tensorrt"),
                   help="bundle format (default: the --target device's)")
    p.add_argument("--precision", default=None, choices=("fp32", "fp16", "int8"),
                   help="default: the --target device's, else fp32")
    p.add_argument("--target", default=None, help="device profile (sensorveil devices list): picks format, "
                   "precision, ONNX opset, static shapes, Edge TPU compilation")
    p.add_argument("--calibration", type=int, default=None, help="int8: calibration samples from the training split")
    p.add_argument("--skip-int8-privacy-check", action="store_true",
                   help="int8: skip re-measuring the probing attack on the quantized bundle (not recommended)")
    p.add_argument("--int8-attacker-epochs", type=positive_int, default=None, metavar="N",
                   help="int8: training epochs of the privacy audit's neural attackers (default 20; fewer is "
                   "quicker and weaker)")
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.add_argument("--index-only", action="store_true",
                   help="pass: leave the substitute samples out (the device emits bank indices only)")
    p.add_argument("--sign", default=None, metavar="KEY",
                   help="sign the manifest with this Ed25519 private key (PEM; `sensorveil keys generate`)")
    p.add_argument("--serial", type=positive_int, default=None, metavar="N",
                   help="with --sign: the bundle's rollback serial (default: the Unix time of signing); devices "
                   "that pin min_serial refuse bundles below theirs")
    p.add_argument("--units", default="sensor", choices=("sensor", "model"),
                   help="sensor (default): the normalization inside the graph where format and precision allow "
                   "(not int8, not multi-stage pipelines); model: the runtime normalizes in numpy")
    p.set_defaults(func=cmd_export)

    p = verbs.add_parser("keys", help="an Ed25519 key pair for signing bundles")
    p.add_argument("action", choices=("generate",))
    p.add_argument("--out", required=True, help="folder for signer.key (private, mode 0600) and signer.pub")
    p.set_defaults(func=cmd_keys)

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
    p.add_argument("--frames", type=positive_int, default=500, help="timed iterations (and stream frames with --source)")
    p.add_argument("--source", default=None, help="also measure end-to-end stream FPS on this source "
                   "(camera:N, video file, kinect, k4a, depthdir:PATH, npy:PATH, synthetic-depth)")
    p.add_argument("--streams", type=positive_int, default=None, metavar="N",
                   help="N copies of --source (default synthetic-depth) into one runtime, batched: aggregate FPS "
                        "and p95 latency for 1, 2, 4, ... N streams (how many sensors one board serves)")
    p.add_argument("--json", default=None, help="write JSON (+ .md table and .png plot beside it)")
    p.set_defaults(func=cmd_benchmark)

    p = verbs.add_parser("devices", help="device profiles: list, detect this machine, check a bundle's operators")
    p.add_argument("action", nargs="?", default="list", choices=("list", "detect", "check"))
    p.add_argument("bundle", nargs="?", default=None, help="check: the bundle directory")
    p.add_argument("--device", default=None, help="check: a profile name from `sensorveil devices list`")
    p.add_argument("--json", default=None, help="check: also write the report to this JSON file")
    p.set_defaults(func=cmd_devices)

    p = verbs.add_parser("run", help="privatize a sensor stream and send the output to a sink")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a[:N|:FILE.mkv], "
                   "depthdir:PATH, npy:PATH or synthetic-depth")
    p.add_argument("--sink", default=None, help="video:FILE.mp4, png:DIR, npz:DIR or udp://HOST:PORT (default: none)")
    p.add_argument("--frames", type=positive_int, default=None, help="stop after N frames (default: until the source ends)")
    p.add_argument("--backend", default="auto")
    p.add_argument("--depth-output", default="patch", choices=("patch", "frame"),
                   help="depth: emit the privatized 180x180 patch, or a full frame with only the patch valid")
    p.add_argument("--json", default=None, help="write the stream report to this JSON file")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads for the model (default: all cores but one, which reads and pre-processes "
                        "the next frames)")
    p.add_argument("--max-bad-share", type=float, default=0.5,
                   help="exit 1 when more than this share of frames was bad or dropped (default 0.5)")
    p.set_defaults(func=cmd_run)

    p = verbs.add_parser("preview", help="raw | privatized side by side: a window, a video, or a web page")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a, depthdir:PATH, ...")
    p.add_argument("--headless", action="store_true", help="no window: write the view to --out")
    p.add_argument("--out", default=None, help="FILE.mp4 for the view (+ FILE.png contact sheet)")
    p.add_argument("--web", default=None, metavar="[HOST:]PORT",
                   help="serve the preview as a web page (MJPEG streams, live counters, the bundle's privacy "
                        "figures); a bare PORT binds 127.0.0.1, 0.0.0.0:PORT exposes it; port 0 picks a free one")
    p.add_argument("--no-raw", action="store_true",
                   help="web: never serve the raw view, only what leaves the device")
    p.add_argument("--loop", action="store_true", help="web: replay a video file from the start when it ends")
    p.add_argument("--frames", type=positive_int, default=None, help="stop after N frames")
    p.add_argument("--backend", default="auto")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads for the model (default: all cores but one, which reads and pre-processes "
                        "the next frames)")
    p.set_defaults(func=cmd_preview)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.error("a VERB is required (see sensorveil --help)")
    try:
        return args.func(args)
    except (SensorveilError, ValueError, OSError) as error:   # OSError: a path that cannot be read or written
        print(f"sensorveil {args.verb}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
