"""An ONNX file's opset imports cut to the domains its nodes use.

onnxruntime.quantization writes an import for every domain today's onnxruntime knows (ai.onnx.ml 5,
com.microsoft, training and preview domains), used or not; onnxruntime 1.10, the last release for
JetPack 4.6's Python 3.6, refuses a model that imports a domain version newer than it knows, even one no
node uses (tests/integration/test_detector_onnx_int8.py runs an int8 bundle there)."""
from __future__ import annotations

from pathlib import Path

import onnx

DEFAULT_DOMAINS = ("", "ai.onnx")


def used_domains(graph) -> set:
    """The domains of every node, in the graph and in its subgraphs (If and Loop bodies)."""
    domains = set()
    for node in graph.node:
        domains.add(node.domain)
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                domains |= used_domains(sub)
    return domains


def drop_unused_opsets(path: Path) -> Path:
    """Rewrite ``path`` keeping the default domain's import and those of domains a node uses."""
    model = onnx.load(str(path))
    used = used_domains(model.graph) | set(DEFAULT_DOMAINS)
    kept = [entry for entry in model.opset_import if entry.domain in used]
    if len(kept) != len(model.opset_import):
        del model.opset_import[:]
        model.opset_import.extend(kept)
        onnx.save(model, str(path))
    return Path(path)
