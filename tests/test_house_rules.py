"""The house's size rules, checked so they hold after every change: no module of the package over 400
lines, no function over 60 (the README's architecture section states them). Lint (ruff) and the areas'
import contracts (import-linter, .importlinter) run in .ci/run."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sensorveil"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_400_lines():
    long = {str(path.relative_to(PACKAGE.parent)): n for path in modules()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
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
