"""The mechanism interface: registries, settings, a multi-graph pipeline through every format that
runs here, and an sdk without import cycles."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sensorveil.runtime import BundleError, Privatizer, stages
from sensorveil.sdk import mechanisms
from sensorveil.sdk.mechanisms.base import TrainRequest

SDK = Path(__file__).resolve().parents[2] / "sensorveil" / "sdk"


@pytest.fixture
def toy(monkeypatch):
    """The test-only mechanism (tests/toy_mechanism.py) and its numpy stage, registered for one test."""
    monkeypatch.setitem(mechanisms.FAMILIES, "tests.toy_mechanism", ("toy",))
    monkeypatch.setitem(stages.STAGE_KINDS, "toy_shift", ("tests.toy_mechanism", "ShiftStage"))
    return mechanisms.get("toy")


def test_registry_lists_every_family_and_refuses_unknown_names():
    assert {"prgan", "ngp", "ap", "laplace", "pass"} <= set(mechanisms.names())
    assert mechanisms.get("ngp").kind == "perturbation" and mechanisms.get("pass").kind == "substitution"
    assert not mechanisms.get("laplace").exportable
    with pytest.raises(ValueError, match="unknown mechanism 'nope'; expected one of prgan"):
        mechanisms.get("nope")


def request_with(settings: dict, **fields) -> TrainRequest:
    return TrainRequest(data=None, useful=["parity"], private=["lt5"], out=Path("."), base={}, settings=settings,
                        **fields)


def test_settings_are_typed_by_the_config_and_unknown_keys_are_named():
    config = mechanisms.get("pass").make_config(request_with({"tau": "0.05", "substitutes": "128"}, seed=7))
    assert config.tau == 0.05 and config.substitutes == 128 and config.seed == 7
    prgan = mechanisms.get("prgan").make_config(request_with({"margin_fractions": "0.1,0.3"}, epochs=4))
    assert prgan.margin_fractions == (0.1, 0.3) and prgan.epochs == 4
    with pytest.raises(ValueError, match="pass has no setting 'temperature'; expected one of .*'tau'"):
        mechanisms.get("pass").make_config(request_with({"temperature": "1"}))
    with pytest.raises(ValueError, match="setting tau='warm': expected a float"):
        mechanisms.get("pass").make_config(request_with({"tau": "warm"}))


@pytest.mark.parametrize("mechanism, key, value", [
    ("pass", "batch_size", "0"), ("pass", "embedding_dim", "0"), ("pass", "embedding_dim", "99999999999"),
    ("prgan", "batch_size", "0"), ("sanitizer", "latent_dim", "0"),
])
def test_a_size_that_cannot_train_is_refused_before_training_with_one_line(mechanism, key, value):
    with pytest.raises(ValueError, match=f"{mechanism} setting {key}={value}: expected a size from 1 to 65,536"):
        mechanisms.get(mechanism).make_config(request_with({key: value}))


@pytest.fixture
def toy_run(toy, tmp_path):
    from sensorveil.sdk.runs import train_run
    return train_run("toy", "digits", out=tmp_path / "toy-run")


@pytest.mark.parametrize("fmt", ["onnx", "tflite", "openvino"])
@pytest.mark.exports
@pytest.mark.trains
def test_every_graph_is_exported_validated_and_run_in_order(toy, toy_run, tmp_path, fmt):
    from sensorveil.export import export_run
    bundle = export_run(toy_run, fmt, tmp_path / f"toy-{fmt}")
    manifest = json.loads((bundle / "manifest.json").read_text())
    [artifact] = manifest["artifacts"].values()
    assert list(artifact["graphs"]) == ["encoder", "decoder"]
    records = manifest["validation"]
    assert sorted(r["graph"] for r in records) == ["decoder", "encoder"]
    assert all(r["status"] == "passed" for r in records), records
    assert manifest["complexity"]["graphs"] == ["encoder", "decoder"]

    privatizer = Privatizer.load(bundle)
    assert privatizer.describe()["pipeline"] == ["model", "toy_shift", "model"] and not privatizer.pipeline.single_model
    x = np.random.default_rng(0).uniform(0, 16, size=(5, 8, 8)).astype(np.float32)
    graphs = toy.graphs(toy_run, json.loads((toy_run / "run.json").read_text()))
    with torch.no_grad():
        latent = graphs["encoder"].module(torch.from_numpy(x / 16)[:, None]).numpy()
        expected = graphs["decoder"].module(torch.from_numpy(latent + np.linspace(-0.5, 0.5, 6,
                                                                                   dtype=np.float32))).numpy()
    np.testing.assert_allclose(privatizer(x), expected[:, 0] * 16, atol=1e-3)


@pytest.mark.exports
@pytest.mark.trains
def test_a_stage_missing_a_key_is_one_bundle_error(toy, toy_run, tmp_path):
    from sensorveil.export import export_run
    bundle = export_run(toy_run, "onnx", tmp_path / "toy")
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["pipeline"][1]["shift"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="pipeline stage 'toy_shift' lacks 'shift'"):
        Privatizer.load(bundle)


def sdk_imports(path: Path) -> set:
    """Every sensorveil.sdk module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sensorveil.sdk"):
            names = [node.module + "." + alias.name for alias in node.names]
            found |= {name for name in names if module_path(name).exists()} or {node.module}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("sensorveil.sdk")}
    return found


def module_path(name: str) -> Path:
    parts = name.split(".")[2:]
    base = SDK.joinpath(*parts) if parts else SDK
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def test_the_sdk_has_no_import_cycles():
    graph = {}
    for path in SDK.rglob("*.py"):
        name = "sensorveil." + ".".join(path.relative_to(SDK.parent).with_suffix("").parts)
        graph[name.removesuffix(".__init__")] = {m for m in sdk_imports(path) if module_path(m).exists()}
    visiting, done = set(), set()

    def visit(module, trail):
        if module in done:
            return
        assert module not in visiting, "import cycle: " + " -> ".join(trail + [module])
        visiting.add(module)
        for imported in graph.get(module, ()):
            visit(imported, trail + [module])
        visiting.discard(module)
        done.add(module)
    for module in graph:
        visit(module, [])
