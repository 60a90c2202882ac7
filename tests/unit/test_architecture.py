"""The package's import graph: one-way arrows in the layer order of docs/architecture.md, no circles.

Every ``import albert.x`` / ``from albert.x import ...`` counts, at module level or inside a function
(a lazy import is still a dependency). The one sanctioned upward edge is the ecosystem's convention:
``PreTrainedModule.from_pretrained`` / ``save_pretrained`` delegate to ``convert.hf`` (lazily).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "albert"

# Lower layers first; a module may import only from its own layer or the layers before it.
LAYERS: list[list[str]] = [
    ["_io", "_fields"],
    ["config"],
    ["tokenizer"],
    ["model", "params"],
    ["optim"],
    ["data"],
    ["convert"],
    ["train"],
    ["tasks"],
    ["export", "serve"],
    ["cli", "__main__"],
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}

# (importing module, imported module): the sanctioned exceptions, each with its reason.
ALLOWED_UPWARD = {
    # from_pretrained / save_pretrained: two-line lazy delegations, the ecosystem's convention
    ("albert.model.albert", "albert.convert.hf"),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (annotations only, never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                inside.update(id(n) for n in ast.walk(stmt))
    return inside


def _imports(path: Path, *, type_checking: bool = True) -> set[str]:
    """The ``albert.*`` modules that ``path`` imports, anywhere in the file (``type_checking=False``: not
    counting imports under ``if TYPE_CHECKING:``, which never run)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "albert")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "albert":
                continue
            out.add(target)
            # `from albert.model import heads`: the submodule is the dependency
            for a in node.names:
                if (SRC.parent / (target + "." + a.name).replace(".", "/")).with_suffix(".py").exists():
                    out.add(target + "." + a.name)
    out.discard(name)
    return out


def _graph(*, type_checking: bool = True) -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, type_checking=type_checking) for p in SRC.rglob("*.py")}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package itself: albert/__init__.py re-exports lazily
    return RANK.get(parts[1])


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in _graph() if m != "albert" and _layer(m) is None)
    assert not missing, f"modules outside the layer table (add them to LAYERS and docs): {missing}"


def test_imports_point_down() -> None:
    bad = []
    for src, targets in _graph().items():
        if src == "albert":
            continue
        for dst in targets:
            if dst == "albert" or (src, dst) in ALLOWED_UPWARD:
                continue
            ls, ld = _layer(src), _layer(dst)
            if ls is not None and ld is not None and ld > ls:
                bad.append(f"{src} -> {dst}")
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(bad))


def test_no_import_cycles() -> None:
    """Circles of imports that run (a type-only import under TYPE_CHECKING is no circle at run time; it
    still counts for the layer order above)."""
    graph = {
        m: {t for t in ts if t in _graph_keys() and (m, t) not in ALLOWED_UPWARD}
        for m, ts in _graph(type_checking=False).items()
    }
    # package __init__ files re-export their submodules; an edge into a package is an edge to its __init__
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # a package's __init__ importing its own submodules, which import the package, is not a circle of
    # code: only count cycles that pass through two different non-__init__ modules
    real = [c for c in cycles if len({p for p in c.split(" -> ") if p not in _packages()}) > 1]
    assert not real, "import cycles:\n" + "\n".join(real)


def _graph_keys() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("*.py")}


def _packages() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("__init__.py")}


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The walker is not blind: a lazy upward import inside a function is found."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from albert.cli.main import main\n", encoding="utf-8")
    tree = ast.parse(f.read_text())
    found = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found == ["albert.cli.main"]
    assert _layer("albert.cli.main") > _layer("albert.model.albert")  # type: ignore[operator]


@pytest.mark.parametrize("limit", [600])
def test_file_and_function_sizes(limit: int) -> None:
    """Files stay under ~600 lines (the TF checkpoint reader excepted), functions under 80."""
    long_files, long_funcs = [], []
    for p in SRC.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        n = text.count("\n")
        if n > limit and p.name != "tf_checkpoint.py":
            long_files.append(f"{p.relative_to(SRC)}: {n}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > 80:
                    long_funcs.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name}: {size}")
    assert not long_files, f"files over {limit} lines: {long_files}"
    assert not long_funcs, f"functions over 80 lines: {long_funcs}"
