"""The extension contracts of the house: one capability table that the exporter, the benchmark,
the runtime's backends, the device profiles, the CLI and the README all read; every backend adapter declares the
Backend interface and every pre-processor the Preprocessor interface."""
import ast
import configparser
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from sensorveil.runtime import capabilities

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_table_is_the_code_table():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- capability table: start -->\n(.*?)\n<!-- capability table: end -->", readme, re.S)
    assert block, "README.md lost its capability table markers"
    assert block.group(1) == capabilities.markdown_table(), \
        "README's table differs: paste `sensorveil devices formats --markdown` between the markers"


def test_every_format_has_one_writer_and_every_backend_one_adapter():
    from sensorveil.export.formats import FORMAT_WRITERS
    from sensorveil.runtime.backends import ADAPTERS, REGISTRY
    assert tuple(FORMAT_WRITERS) == capabilities.formats()
    assert set(ADAPTERS) == set(capabilities.backends())
    assert {name: entry[2] for name, entry in REGISTRY.items()} == \
        {row.backend: row.runtime_package for row in capabilities.CAPABILITIES}


def test_every_row_of_the_table_is_complete_and_names_what_exists():
    """A new backend is one row: its adapter, its place in auto's order, its writer and its person-detector writer
    are columns of that row, and each must name something real."""
    import importlib.util

    from sensorveil.export.formats import FORMAT_WRITERS
    from sensorveil.export.person_detector import DETECTOR_WRITERS
    from sensorveil.runtime.backends import AUTO_ORDER
    ranks = [row.auto_rank for row in capabilities.CAPABILITIES]
    assert sorted(ranks) == list(range(1, len(ranks) + 1)), "auto_rank: each backend its own place"
    for row in capabilities.CAPABILITIES:
        assert all(value not in (None, "") for key, value in row._asdict().items()
                   if key not in ("accelerator", "runtime_alternatives", "benchmarked")), row
        for column in ("adapter", "writer", "detector_writer"):   # read, not imported: the library may be absent
            module, name = capabilities.split_reference(getattr(row, column))
            source = Path(importlib.util.find_spec(module).origin).read_text()
            assert re.search(rf"^(class|def) {name}\b", source, re.M), (row.backend, column)
        assert FORMAT_WRITERS[row.format].__name__ == capabilities.split_reference(row.writer)[1]
        assert DETECTOR_WRITERS[row.backend].__name__ == capabilities.split_reference(row.detector_writer)[1]
    assert AUTO_ORDER == capabilities.auto_order_of_table()


def test_the_extras_the_table_names_exist():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    extras = set(config["options.extras_require"])
    assert {row.export_extra for row in capabilities.CAPABILITIES} <= extras


def test_every_device_profile_is_a_row_of_the_table():
    from sensorveil import devices
    for name in devices.list_profiles():
        profile = devices.load_profile(name)
        row = capabilities.row_for_backend(profile["backend"])
        assert row.format == profile["format"], name
        assert set(profile["precisions"]) <= set(row.precisions), name


def test_benchmark_and_exporter_read_the_table():
    from sensorveil.benchmarks.formats import FORMAT_PRECISIONS
    from sensorveil.export.exporter import EXTRA_OF_MODULE, FORMATS
    assert FORMATS == capabilities.formats()
    assert FORMAT_PRECISIONS["tensorrt"] == ("fp16", "int8") and FORMAT_PRECISIONS["onnx"] == ("fp32", "int8")
    assert EXTRA_OF_MODULE["litert_torch"] == "export-tflite" and EXTRA_OF_MODULE["onnxscript"] == "onnx"


@pytest.mark.exports
@pytest.mark.trains
def test_the_exporter_refuses_a_precision_its_format_does_not_write(digits_run, tmp_path):
    from sensorveil.export import export_run
    with pytest.raises(ValueError, match="onnx format is exported in fp32 or int8; use --format tflite or "
                                         "openvino or tensorrt for fp16"):
        export_run(digits_run, "onnx", tmp_path / "b", precision="fp16")
    assert not (tmp_path / "b").exists()


@pytest.mark.exports
def test_the_cli_offers_the_table(capsys):
    from sensorveil.cli import main
    assert main(["devices", "formats"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 + len(capabilities.CAPABILITIES)
    assert max(len(line) for line in printed) <= 100     # fits a terminal
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert capabilities.format_help() in " ".join(capsys.readouterr().out.split())


def adapter_bases(module_name: str, class_name: str) -> "list[str]":
    """The base classes an adapter names, read from its source (its library may not import here)."""
    path = REPO / (module_name.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return [base.id for base in node.bases if isinstance(base, ast.Name)]


@pytest.mark.parametrize("backend", capabilities.backends())
def test_every_adapter_declares_the_backend_interface(backend):
    from sensorveil.runtime.backends import ADAPTERS, library_available
    from sensorveil.runtime.backends.base import Backend
    module_name, class_name = ADAPTERS[backend]
    bases = adapter_bases(module_name, class_name)
    assert bases and bases[0] in ("Backend", "LiteRTBackend"), (backend, bases)
    if library_available(backend) and importlib.util.find_spec(capabilities.row_for_backend(backend).runtime_package):
        adapter = getattr(importlib.import_module(module_name), class_name)
        assert issubclass(adapter, Backend) and not inspect.isabstract(adapter)


def test_every_preprocessor_declares_the_interface_and_a_stream_refuses_one_that_does_not():
    from sensorveil.runtime import preprocess
    from sensorveil.runtime.camera.pipeline import PersonCrops
    from sensorveil.runtime.preprocessor import Preprocessor, check_preprocessor
    for cls in (preprocess.Passthrough, preprocess.DepthPersonPatch, preprocess.FitToBundle, PersonCrops):
        assert issubclass(cls, Preprocessor) and cls.name and not inspect.isabstract(cls)

    class DuckTyped:
        name = "duck"

        def prepare(self, frame):
            return frame.data, None

    with pytest.raises(TypeError, match="preprocessor: got DuckTyped; expected a subclass of"):
        check_preprocessor(DuckTyped())
    check_preprocessor(preprocess.Passthrough())
