"""The one console script, `sensorveil`. Each verb imports what it needs when it runs, so the
runtime verbs work on a device that has numpy and one backend library and nothing else."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sensorveil import __version__
from sensorveil.runtime.errors import SensorveilError


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
    from sensorveil.quickstart import quickstart
    quickstart(Path(args.out), epochs=args.epochs)
    return 0


def cmd_train(args) -> int:
    from sensorveil.sdk.runs import read_run, train_run
    out = train_run(args.mechanism, args.dataset, data_path=args.data_path, useful=_one(args.useful, "--useful"),
                    private=_one(args.private, "--private"), out=args.out, epochs=args.epochs, seed=args.seed)
    run = read_run(out)
    _print_mapping(f"trained {args.mechanism} on {args.dataset} -> {out}", {**run["reference"], **run["metrics"]})
    return 0


def cmd_evaluate(args) -> int:
    from sensorveil.sdk.assess import evaluate_path
    result = evaluate_path(args.path, backend=args.backend)
    _print_mapping(f"evaluation of {args.path}", result)
    _write_json(result, args.json)
    return 0


def cmd_export(args) -> int:
    from sensorveil.export import export_run
    out = export_run(args.run_dir, args.format, args.out, precision=args.precision)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in manifest.get("validation", []):
        print(f"validation {record['backend']}: {record['status']}"
              + (f" (max |diff| {record['max_abs_diff']:.2e} <= {record['tolerance']})" if "max_abs_diff" in record else
                 f" ({record.get('reason', '')})"))
    print(f"bundle written to {out}")
    return 0


def cmd_benchmark(args) -> int:
    from sensorveil.benchmarks.bench import benchmark_bundle
    from sensorveil.benchmarks.report import format_table, write_report
    result = benchmark_bundle(args.bundle, backend=args.backend, iters=args.frames)
    print(format_table(result["rows"]))
    print(f"matmul peak of this CPU: {result['matmul_peak_gflops']:.1f} GFLOP/s")
    if args.json:
        stem = Path(args.json).with_suffix("")
        write_report(result, json_path=args.json, markdown_path=f"{stem}.md", plot_path=f"{stem}.png")
        print(f"wrote {args.json}, {stem}.md, {stem}.png")
    return 0


def _one(values, flag):
    """The PR-GAN mechanisms take one useful and one private attribute."""
    if not values:
        return None
    if len(values) > 1:
        raise SystemExit(f"error: PR-GAN takes one {flag} attribute, got {values}")
    return values[0]


# -- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorveil", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"sensorveil {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("quickstart", help="train PR-GAN on digits, attack it, export, run and benchmark it")
    p.add_argument("--out", default="sensorveil-out", help="where runs, bundles and reports go")
    p.add_argument("--epochs", type=int, default=None, help="generator epochs (default: the config's)")
    p.set_defaults(func=cmd_quickstart)

    p = verbs.add_parser("train", help="train a privatizing mechanism on a dataset")
    p.add_argument("mechanism", help="prgan, ngp, ap or laplace")
    p.add_argument("--dataset", required=True, help="digits, ujiindoorloc, synthetic-depth or npz")
    p.add_argument("--data-path", default=None, help="path to the dataset's files (ujiindoorloc zip, npz)")
    p.add_argument("--private", nargs="+", default=None, help="private attribute(s) to hide")
    p.add_argument("--useful", nargs="+", default=None, help="useful attribute(s) to keep")
    p.add_argument("--out", default=None, help="run directory (default runs/MECHANISM-DATASET)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0, help="training seed (the deployed mechanism draws its own)")
    p.set_defaults(func=cmd_train)

    p = verbs.add_parser("evaluate", help="protocol accuracies and the probing attack for a run or bundle")
    p.add_argument("path", help="RUN_DIR or BUNDLE")
    p.add_argument("--backend", default="auto", help="runtime backend for a bundle")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=cmd_evaluate)

    p = verbs.add_parser("export", help="turn a run into a validated bundle")
    p.add_argument("run_dir")
    p.add_argument("--format", required=True, help="onnx (more formats as the exporter gains them)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "int8"))
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.set_defaults(func=cmd_export)

    p = verbs.add_parser("benchmark", help="FLOPs, latency and FPS of a bundle per backend")
    p.add_argument("bundle")
    p.add_argument("--backend", default="all", help="a backend name or 'all' the bundle carries")
    p.add_argument("--frames", type=int, default=500, help="timed iterations")
    p.add_argument("--json", default=None, help="write JSON (+ .md table and .png plot beside it)")
    p.set_defaults(func=cmd_benchmark)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SensorveilError, ValueError, FileNotFoundError) as error:
        print(f"sensorveil {args.verb}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
