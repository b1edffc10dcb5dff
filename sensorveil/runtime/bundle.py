"""Bundle schema: reading, validating and hashing. No pickle anywhere: a manifest is JSON,
models are files the backend libraries parse, arrays travel as .npy loaded with allow_pickle=False.

The writer lives in ``sensorveil.export``; it uses ``sha256_of`` and ``SCHEMA_VERSION`` from
here so that one module defines what a valid bundle is.
"""
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensorveil.runtime.errors import BundleError

# 2: a mechanism is a pipeline of stages over named graphs (artifacts[backend]["graphs"]).
# 1: one model per backend (artifacts[backend]["file"]); read as the equivalent schema-2 pipeline.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
MANIFEST_NAME = "manifest.json"
REQUIRED_KEYS = ("schema_version", "mechanism", "input", "output", "artifacts", "files")
SINGLE_GRAPH = "model"      # the graph name of a one-model bundle (and of every schema-1 bundle)
REQUIRED_SPEC_KEYS = ("name", "sample_shape", "model_shape", "dtype", "sensor_range", "normalization")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_record(path: Path) -> dict:
    return {"sha256": sha256_of(path), "size": path.stat().st_size}


@dataclass(frozen=True)
class Bundle:
    """A verified bundle directory and its parsed manifest."""

    root: Path
    manifest: dict

    def path(self, name: str) -> Path:
        return self.root / name

    def artifact(self, backend: str) -> dict:
        artifacts = self.manifest["artifacts"]
        if backend not in artifacts:
            raise BundleError(
                f"bundle {self.root} has no artifact for backend {backend!r}; "
                f"it has: {', '.join(sorted(artifacts)) or 'none'}")
        return artifacts[backend]

    @property
    def pipeline(self) -> list:
        """The mechanism's stages, each a dict with a 'kind' (see sensorveil.runtime.stages)."""
        return pipeline_of(self.manifest)

    def graph_names(self, backend: str) -> list:
        return list(graphs_of(self.artifact(backend)))

    def graph_artifact(self, backend: str, graph: str = SINGLE_GRAPH) -> dict:
        """The backend's artifact entry for one graph: its own keys ('file', ...) over the shared ones."""
        artifact = self.artifact(backend)
        graphs = graphs_of(artifact)
        if graph not in graphs:
            raise BundleError(f"bundle {self.root}: the {backend} artifact has no graph {graph!r}; "
                              f"it has {sorted(graphs)}")
        shared = {key: value for key, value in artifact.items() if key not in ("graphs", "file")}
        return {**shared, **graphs[graph]}


def graphs_of(artifact: dict) -> dict:
    """{graph name: {"file": ...}} of one backend's artifact, for either schema."""
    if "graphs" in artifact:
        return artifact["graphs"]
    return {SINGLE_GRAPH: {key: value for key, value in artifact.items() if key == "file"}}


def pipeline_of(manifest: dict) -> list:
    """Schema 2 states its pipeline; a schema-1 bundle is one model, followed by PASS's draw for
    the substitution kind (its bank entry lived under mechanism.substitution)."""
    if "pipeline" in manifest:
        return manifest["pipeline"]
    stages = [{"kind": "model", "graph": SINGLE_GRAPH}]
    mechanism = manifest["mechanism"]
    if mechanism.get("kind") == "substitution":
        stages.append({"kind": "substitution", **(mechanism.get("substitution") or {})})
    return stages


def read_manifest(root: Path) -> dict:
    manifest_path = root / MANIFEST_NAME
    if not root.is_dir():
        raise BundleError(f"expected a bundle directory, got {root} (not a directory)")
    if not manifest_path.is_file():
        raise BundleError(f"expected {manifest_path} (a bundle directory holds manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"{manifest_path} is not valid JSON: {error}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{manifest_path} must hold a JSON object, got {type(manifest).__name__}")
    return manifest


def validate_manifest(manifest: dict, where: Path) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise BundleError(f"{where}: manifest lacks required keys {missing}; expected {list(REQUIRED_KEYS)}")
    version = manifest["schema_version"]
    if version not in READABLE_SCHEMAS:
        raise BundleError(
            f"{where}: manifest schema_version {version!r} is not supported; this runtime reads "
            f"schema_version {', '.join(map(str, READABLE_SCHEMAS))} (upgrade sensorveil or re-export the bundle)")
    for side in ("input", "output"):
        spec = manifest[side]
        if not isinstance(spec, dict):
            raise BundleError(f"{where}: manifest '{side}' must be an object with keys {list(REQUIRED_SPEC_KEYS)}")
        absent = [key for key in REQUIRED_SPEC_KEYS if key not in spec]
        if absent:
            raise BundleError(f"{where}: manifest '{side}' lacks {absent}; expected {list(REQUIRED_SPEC_KEYS)}")
    if not isinstance(manifest["artifacts"], dict) or not manifest["artifacts"]:
        raise BundleError(f"{where}: manifest 'artifacts' must name at least one backend's model file")
    graph_key = "graphs" if version >= 2 else "file"
    for backend, artifact in manifest["artifacts"].items():
        if not isinstance(artifact, dict) or graph_key not in artifact:
            raise BundleError(f"{where}: artifact {backend!r} must be an object with a {graph_key!r} key")
        graphs = graphs_of(artifact)
        if not isinstance(graphs, dict) or not graphs:
            raise BundleError(f"{where}: artifact {backend!r} 'graphs' must map graph names to {{'file': ...}}")
        for graph, entry in graphs.items():
            if not isinstance(entry, dict) or entry.get("file") not in manifest["files"]:
                raise BundleError(f"{where}: artifact {backend!r} graph {graph!r} file "
                                  f"{entry.get('file') if isinstance(entry, dict) else entry!r} is not listed in 'files'")
    if version >= 2:
        validate_pipeline(manifest, where)


def validate_pipeline(manifest: dict, where: Path) -> None:
    """Stages are objects with a kind; model stages name a graph every artifact carries."""
    pipeline = manifest.get("pipeline")
    if not isinstance(pipeline, list) or not pipeline:
        raise BundleError(f"{where}: manifest 'pipeline' must be a non-empty list of stages")
    for position, stage in enumerate(pipeline):
        if not isinstance(stage, dict) or not isinstance(stage.get("kind"), str):
            raise BundleError(f"{where}: pipeline stage {position} must be an object with a 'kind' string")
        if stage["kind"] == "model":
            for backend, artifact in manifest["artifacts"].items():
                if stage.get("graph") not in graphs_of(artifact):
                    raise BundleError(f"{where}: pipeline stage {position} runs graph {stage.get('graph')!r}, "
                                      f"which the {backend!r} artifact does not carry")


def verify_files(root: Path, files: "dict[str, Any]") -> None:
    """Every listed file exists, stays inside the bundle and matches its size and sha256."""
    resolved_root = root.resolve()
    for name, record in files.items():
        path = (root / name).resolve()
        if resolved_root not in path.parents:
            raise BundleError(f"{root}: file entry {name!r} points outside the bundle directory")
        if not path.is_file():
            raise BundleError(f"{root}: listed file {name!r} is missing")
        if not isinstance(record, dict) or "sha256" not in record:
            raise BundleError(f"{root}: file entry {name!r} needs a 'sha256' (and 'size')")
        if "size" in record and path.stat().st_size != record["size"]:
            raise BundleError(
                f"{root}: {name} has {path.stat().st_size} bytes, the manifest says {record['size']}; "
                "the bundle was modified or truncated, refusing to load it")
        actual = sha256_of(path)
        if actual != record["sha256"]:
            raise BundleError(
                f"{root}: {name} sha256 {actual[:12]}... does not match the manifest's "
                f"{str(record['sha256'])[:12]}...; the bundle was modified, refusing to load it")


def open_bundle(path: "str | Path") -> Bundle:
    """Read, validate and verify a bundle. Raises BundleError with the reason otherwise."""
    root = Path(path)
    if root.is_file() and root.name == MANIFEST_NAME:
        root = root.parent
    manifest = read_manifest(root)
    validate_manifest(manifest, root)
    verify_files(root, manifest["files"])
    return Bundle(root=root, manifest=manifest)
