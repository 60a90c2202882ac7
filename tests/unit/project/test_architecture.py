"""The package's import graph: one-way arrows in the layer order of docs/architecture.md, no circles.

Every ``import albert.x`` / ``from albert_lm.x import ...`` counts, at module level or inside a function
(a lazy import is still a dependency). The one sanctioned upward edge is the ecosystem's convention:
``PreTrainedModule.from_pretrained`` / ``save_pretrained`` delegate to ``convert.hf`` (lazily).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "albert_lm"

# Lower layers first; a module may import only from its own layer or the layers before it.
LAYERS: list[list[str]] = [
    ["_io", "_fields", "_text", "_proc", "_hub", "_tables", "_locks"],
    ["config"],
    ["runtime"],
    ["tokenizer"],
    ["model", "params"],
    ["optim"],
    ["data"],
    ["convert"],
    ["train"],
    ["tasks"],
    ["pretrain", "finetune", "probe"],
    ["infer"],
    ["export", "serve"],
    ["cli", "__main__"],
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}

# (importer, imported) packages that may never meet even where the order would allow it, each with its reason
# (docs/architecture.md renders this table). "*": any package of the library (and scripts/, benchmarks/).
FORBIDDEN: list[tuple[str, str, str]] = [
    ("train", "model", "the loop takes any module that returns a dict with `loss`"),
    ("train", "data", "the loop takes any iterable of batches"),
    ("train", "tokenizer", "the loop never sees text"),
    ("train", "tasks", "the loop knows no task"),
    ("data", "model", "pretraining data is made without a model"),
    ("*", "cli", "the command is the top: scripts and benchmarks use the library"),
]

# (importing module, imported module): the sanctioned exceptions, each with its reason.
ALLOWED_UPWARD = {
    # from_pretrained / save_pretrained: two-line lazy delegations, the ecosystem's convention
    ("albert_lm.model.albert", "albert_lm.convert.hf"),
}


def _module_name(path: Path, root: Path = SRC) -> str:
    if not path.is_relative_to(root.parent):  # a script or benchmark: a module of no package
        return f"_outside.{path.stem}"
    rel = path.relative_to(root.parent).with_suffix("")
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


def _is_module(dotted: str, root: Path) -> bool:
    """Whether ``dotted`` (``albert_lm.model.heads``, ``albert_lm.cli``) is a module or a package under ``root``."""
    path = root.parent / dotted.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _exports(root: Path) -> dict[str, str]:
    """``albert/__init__.py``'s lazy re-exports, ``{name: defining module}`` (its ``_EXPORTS`` literal):
    ``from albert_lm import AlbertConfig`` depends on ``albert_lm.config``, not on the package."""
    init = root / "__init__.py"
    if not init.is_file():
        return {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets) and node.value:
                return dict(ast.literal_eval(node.value))
    return {}


def _imports(path: Path, *, type_checking: bool = True, root: Path = SRC) -> set[str]:
    """The ``albert.*`` modules that ``path`` imports, anywhere in the file (``type_checking=False``: not
    counting imports under ``if TYPE_CHECKING:``, which never run). ``from albert_lm[.x] import y`` counts
    as ``albert[.x].y`` where ``y`` is a module or package (or the module that ``albert`` re-exports
    ``y`` from), else as ``albert[.x]``."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    exports = _exports(root)
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "albert_lm")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "albert_lm":
                continue
            for a in node.names:
                # `from albert_lm.model import heads`, `from albert_lm import cli`: the submodule or package is
                # the dependency (recorded as `albert`, the second was exempt from every check)
                if _is_module(f"{target}.{a.name}", root):
                    out.add(f"{target}.{a.name}")
                elif target == "albert_lm" and a.name in exports:
                    out.add(exports[a.name])
                else:
                    out.add(target)
    out.discard(name)
    return out


def _graph(*, type_checking: bool = True, root: Path = SRC) -> dict[str, set[str]]:
    """``{module: the albert modules it imports}`` for every module under ``root``.

    Raises:
        AssertionError: no module found (a moved or empty source tree would pass every check vacuously).
    """
    graph = {
        _module_name(p, root): _imports(p, type_checking=type_checking, root=root) for p in root.rglob("*.py")
    }
    assert graph, f"no modules under {root}: the import checks would pass on nothing"
    return graph


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package itself: albert/__init__.py re-exports lazily
    return RANK.get(parts[1])


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def forbidden_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"src -> dst (reason)"`` for each import that `FORBIDDEN` names."""
    bad = []
    for src, targets in graph.items():
        for dst in targets:
            for importer, imported, why in FORBIDDEN:
                ps, pd = _package(src), _package(dst)
                applies = ps != imported if importer == "*" else ps == importer
                if pd == imported and applies and not (imported == "cli" and ps == "__main__"):
                    bad.append(f"{src} -> {dst} ({why})")
    return sorted(bad)


def upward_imports(root: Path = SRC) -> list[str]:
    """``"src -> dst"`` for each import from a lower layer to a higher one (the sanctioned ones aside), and
    each forbidden pair (`FORBIDDEN`)."""
    bad = []
    graph = _graph(root=root)
    for src, targets in graph.items():
        if src == "albert_lm":
            continue
        for dst in targets:
            if dst == "albert_lm" or (src, dst) in ALLOWED_UPWARD:
                continue
            ls, ld = _layer(src), _layer(dst)
            if ls is not None and ld is not None and ld > ls:
                bad.append(f"{src} -> {dst}")
    edges = {b.split(" (")[0] for b in bad}
    return sorted(bad + [f for f in forbidden_imports(graph) if f.split(" (")[0] not in edges])


def script_imports(folders: list[Path]) -> list[str]:
    """``"file -> module (reason)"`` for each library module a script or benchmark imports that
    `FORBIDDEN` keeps from everyone (``cli``)."""
    bad = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for dst in _imports(path, root=SRC):
                for importer, imported, why in FORBIDDEN:
                    if importer == "*" and _package(dst) == imported:
                        bad.append(f"{path.name} -> {dst} ({why})")
    return bad


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in _graph() if m != "albert_lm" and _layer(m) is None)
    assert not missing, f"modules outside the layer table (add them to LAYERS and docs): {missing}"


def test_imports_point_down() -> None:
    bad = upward_imports()
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_scripts_and_benchmarks_use_the_library_not_the_command() -> None:
    root = SRC.parents[1]
    folders = [root / "scripts", root / "benchmarks", root / "tests"]
    assert all(f.is_dir() for f in folders)
    bad = script_imports(folders[:2])
    assert not bad, "scripts or benchmarks importing the command:\n" + "\n".join(bad)


def test_the_checker_sees_a_script_importing_the_command(tmp_path: Path) -> None:
    (tmp_path / "bench_x.py").write_text("from albert_lm.cli.predict import run\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("from albert_lm.infer.predictor import Predictor\n", encoding="utf-8")
    assert script_imports([tmp_path]) == [
        "bench_x.py -> albert_lm.cli.predict (the command is the top: scripts and benchmarks use the library)"
    ]


@pytest.mark.parametrize(
    ("path", "source", "edge"),
    [
        ("train/x.py", "from albert_lm.model import AlbertModel\n", "albert_lm.train.x -> albert_lm.model"),
        (
            "train/x.py",
            "def f():\n    import albert_lm.data.shards\n",
            "albert_lm.train.x -> albert_lm.data.shards",
        ),
        (
            "data/x.py",
            "from albert_lm.model.heads import HEADS\n",
            "albert_lm.data.x -> albert_lm.model.heads",
        ),
        (
            "train/x.py",
            "from albert_lm.tasks.glue import SPECS\n",
            "albert_lm.train.x -> albert_lm.tasks.glue",
        ),
    ],
)
def test_the_checker_sees_a_forbidden_pair(tmp_path: Path, path: str, source: str, edge: str) -> None:
    """`train -> model` is downward in the layer order, yet forbidden: the checker names it and why."""
    root = _tree(
        tmp_path,
        {
            path: source,
            "model/heads.py": "",
            "data/shards.py": "",
            "tasks/glue.py": "",
            "model/__init__.py": "",
        },
    )
    bad = upward_imports(root)
    assert [b.split(" (")[0] for b in bad] == [edge], bad


def test_the_graph_is_the_real_package() -> None:
    """Not vacuous: every layer has modules, and edges known to exist are seen."""
    graph = _graph()
    assert {_layer(m) for m in graph} >= set(range(len(LAYERS)))
    assert sum(len(t) for t in graph.values()) > 2 * len(graph)
    assert "albert_lm.cli.main" in graph["albert_lm.__main__"]  # `from albert_lm.cli.main import main`
    assert "albert_lm.model" in graph["albert_lm.pretrain.run"]


def test_no_import_cycles() -> None:
    """Circles of imports that run (a type-only import under TYPE_CHECKING is no circle at run time; it
    still counts for the layer order above)."""
    keys = set(_graph())
    graph = {
        m: {t for t in ts if t in keys and (m, t) not in ALLOWED_UPWARD}
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


def _packages() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("__init__.py")}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A source tree ``tmp_path/albert`` with these files (and an ``__init__.py`` in every folder)."""
    root = tmp_path / "albert_lm"
    for rel, text in files.items():
        path = root / rel
        for folder in [root, *reversed(path.relative_to(root).parents)]:
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("source", "edge"),
    [
        (
            "def f():\n    from albert_lm.cli.main import main\n",
            "albert_lm.model.x -> albert_lm.cli.main",
        ),  # lazy
        ("from albert_lm import cli\n", "albert_lm.model.x -> albert_lm.cli"),  # was recorded as `albert`
        (
            "from albert_lm import load_model\n",
            "albert_lm.model.x -> albert_lm.convert.hf",
        ),  # a lazy re-export
        ("from ..cli import main\n", "albert_lm.model.x -> albert_lm.cli.main"),  # relative
        ("import albert_lm.tasks.glue as glue\n", "albert_lm.model.x -> albert_lm.tasks.glue"),
    ],
)
def test_the_checker_sees_a_violation(tmp_path: Path, source: str, edge: str) -> None:
    """The real checker (`upward_imports`, not a re-implementation of its walk) on a planted tree."""
    root = _tree(
        tmp_path,
        {
            "model/x.py": source,
            "cli/main.py": "def main():\n    return 0\n",
            "convert/hf.py": "",
            "tasks/glue.py": "",
            "__init__.py": '_EXPORTS: dict[str, str] = {"load_model": "albert_lm.convert.hf"}\n',
        },
    )
    assert upward_imports(root) == [edge]
    (root / "model" / "x.py").write_text(
        "from albert_lm import config\nfrom albert_lm.config import AlbertConfig\n"
    )
    assert upward_imports(root) == []  # downward imports pass


def test_an_empty_tree_fails_the_checker(tmp_path: Path) -> None:
    (tmp_path / "albert_lm").mkdir()
    with pytest.raises(AssertionError, match="no modules under"):
        upward_imports(tmp_path / "albert_lm")


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


def _doc_rows(heading: str) -> list[list[str]]:
    """The rows of the first table under ``## heading`` in docs/architecture.md, cells stripped."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]  # header and rule skipped


def test_the_doc_renders_the_layer_table() -> None:
    rows = _doc_rows("Layers")
    assert [int(r[0]) for r in rows] == list(range(len(LAYERS)))
    assert [[m.strip("`") for m in r[1].split(", ")] for r in rows] == LAYERS


def test_the_doc_renders_the_forbidden_pairs() -> None:
    rows = _doc_rows("Forbidden pairs")
    assert [(r[0].strip("`"), r[1].strip("`"), r[2]) for r in rows] == FORBIDDEN
