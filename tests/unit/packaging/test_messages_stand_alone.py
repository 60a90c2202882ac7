"""What the package says to its users (log messages, errors, help) does not send them to docs/*.md: the
wheel does not ship the docs. Only string values are checked (docstrings and comments are for readers of
the source tree)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "albert_lm"


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
        # an attribute docstring: a string statement right after an assignment
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if isinstance(body, list):
                for stmt in body[1:]:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                        ids.add(id(stmt.value))
    return ids


def docs_references(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and id(node) not in skip else None
            if isinstance(text, str) and "docs/" in text:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_user_facing_string_cites_docs() -> None:
    assert docs_references(SRC) == []


def test_the_check_sees_a_message(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        '"""See docs/a.md."""\nimport logging\n# docs/b.md\n'
        'def f():\n    """docs/c.md"""\n    logging.warning("see docs/d.md")\n'
    )
    assert docs_references(pkg) == ["pkg/m.py:6"]
