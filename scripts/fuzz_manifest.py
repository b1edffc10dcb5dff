"""Coverage-guided fuzzing of the bundle loader's manifest handling, with atheris.

Each input becomes manifest.json in a scratch copy of a real bundle (its model and array files in
place): an input starting with an even byte is the manifest's text itself (JSON syntax, numbers,
nesting), one starting with an odd byte steers edits of the bundle's valid manifest (a field deleted,
retyped, wrapped or set to NaN, a negative or huge number), so the fuzzer also reaches the checks
behind a well-formed manifest. The loader must either load it, and the loaded privatizer run one sample, or raise one
BundleError. Anything else (KeyError, TypeError, RecursionError, a crash inside a backend) is a
finding: libFuzzer stops and writes the input to crash-<sha1> in the current folder.

    PYTHONPATH=. python scripts/fuzz_manifest.py --seconds 300          # or --runs 20000
    PYTHONPATH=. python scripts/fuzz_manifest.py crash-<sha1>           # replay one finding

The corpus starts from the bundle's own manifest (compact, so byte mutations stay near-valid) and a
dictionary of JSON tokens and field names; extra arguments go to libFuzzer unchanged.
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BUNDLE = ROOT / "tests" / "fixtures" / "schema1-pass-digits-onnx"
TOKENS = ['"schema_version"', '"sample_shape"', '"model_shape"', '"normalization"', '"scale"', '"offset"',
          '"sensor_range"', '"dtype"', '"files"', '"sha256"', '"size"', '"artifacts"', '"graphs"', '"file"',
          '"pipeline"', '"kind"', '"graph"', '"bank_size"', '"substitution"', '"model.onnx"', '"./model.onnx"',
          '"../x"', '"object"', '"float32"', '"uint16"', 'null', 'true', 'NaN', 'Infinity', '-Infinity', '-1', '0',
          '8589934592', '1e309', '[', ']', '{', '}', ',', ':']

try:
    import atheris
except ImportError:
    atheris = None


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=None, help="stop after this many seconds")
    parser.add_argument("--runs", type=int, default=None, help="stop after this many inputs")
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="bundle whose files the inputs use")
    return parser.parse_known_args(argv)


def scratch_copy(bundle: Path) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-manifest-")) / "bundle"
    shutil.copytree(bundle, folder)
    return folder


def libfuzzer_args(args, rest, scratch: Path, manifest: dict) -> list:
    """The seed corpus, the token dictionary and the limits, as libFuzzer flags."""
    corpus = scratch.parent / "corpus"
    corpus.mkdir()
    (corpus / "seed-text").write_bytes(b"\x00" + json.dumps(manifest, separators=(",", ":")).encode())
    (corpus / "seed-edits").write_bytes(b"\x01" + bytes(range(64)))
    dictionary = scratch.parent / "tokens.dict"
    dictionary.write_text("".join("{}\n".format(json.dumps(token)) for token in TOKENS))
    flags = ["-dict={}".format(dictionary)]
    if args.seconds is not None:
        flags.append("-max_total_time={}".format(args.seconds))
    if args.runs is not None:
        flags.append("-runs={}".format(args.runs))
    replay = [item for item in rest if not item.startswith("-")]
    return [sys.argv[0]] + flags + [item for item in rest if item.startswith("-")] + (replay or [str(corpus)])


def field_paths(node, prefix=()):
    """Every key path of a JSON tree, the whole tree (()) first."""
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    return [prefix] + [path for key, child in children for path in field_paths(child, prefix + (key,))]


def edited_manifest(manifest: dict, data: bytes) -> bytes:
    """The valid manifest with a few edits chosen by the fuzzer's bytes."""
    provider = atheris.FuzzedDataProvider(data)
    manifest = json.loads(json.dumps(manifest))
    for _ in range(provider.ConsumeIntInRange(1, 4)):
        paths = field_paths(manifest)[1:]
        *parents, last = paths[provider.ConsumeIntInRange(0, len(paths) - 1)]
        node = manifest
        for key in parents:
            node = node[key]
        values = [None, True, 0, -1, 1 << 33, float("nan"), float("inf"), "", "object", [], {}, [node[last]],
                  {"value": node[last]}, provider.ConsumeInt(8), provider.ConsumeRegularFloat(),
                  provider.ConsumeUnicodeNoSurrogates(12)]
        choice = provider.ConsumeIntInRange(0, len(values))
        if choice == len(values):
            del node[last]
        else:
            node[last] = values[choice]
    return json.dumps(manifest).encode()


def make_target(scratch: Path, manifest: dict):
    import numpy as np

    from sensorveil.runtime import BundleError, Privatizer

    def target(data: bytes) -> None:
        if not data:
            return
        text = data[1:] if data[0] % 2 == 0 else edited_manifest(manifest, data[1:])
        (scratch / "manifest.json").write_bytes(text)
        try:
            privatizer = Privatizer.load(scratch, backend="onnxruntime")
        except BundleError:
            return
        spec = privatizer.input_spec
        privatizer(np.full(spec.sample_shape, spec.low, dtype=spec.dtype))
    return target


def main(argv=None) -> int:
    args, rest = parse_args(sys.argv[1:] if argv is None else argv)
    if atheris is None:
        print("fuzz_manifest: atheris is not installed, so nothing was fuzzed. Install it with "
              "`pip install atheris` (it needs a clang/libFuzzer toolchain where no wheel exists); the "
              "hypothesis property test tests/integration/test_manifest_schema.py covers the same contract without it.",
              file=sys.stderr)
        return 2
    scratch = scratch_copy(args.bundle)
    manifest = json.loads((args.bundle / "manifest.json").read_text())
    with atheris.instrument_imports(include=["sensorveil"]):
        target = make_target(scratch, manifest)
    atheris.Setup(libfuzzer_args(args, rest, scratch, manifest), target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
