"""The house's size rules, checked so they hold after every change: no module of the package over 400
lines, no function over 60 (the README's architecture section states them). Lint (ruff) and the areas'
import contracts (import-linter, .importlinter) run in .ci/run."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sensorveil"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Named exceptions to the module rule, each with its reason and its own ceiling: a module with one job is
# never trimmed or split only to pass the rule.
MODULE_EXCEPTIONS = {
    "sensorveil/runtime/stream.py": (450, "one job, the stream loop: read ahead, pre-process, privatize, sink, "
                                          "count; its counters and timings are one state machine"),
}


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_400_lines():
    def ceiling(name):
        return MODULE_EXCEPTIONS.get(name, (MAX_MODULE_LINES, ""))[0]
    long = {name: n for name, n in ((str(path.relative_to(PACKAGE.parent)), len(path.read_text().splitlines()))
                                    for path in modules()) if n > ceiling(name)}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long}"


def test_no_function_over_60_lines():
    long = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({length})")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
