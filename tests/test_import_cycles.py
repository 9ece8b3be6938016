"""No import cycles between the project's own modules.

An import anywhere in a module counts, inside a function too: a deferred
import only hides a cycle from start-up, not from the reader who has to hold
both modules in mind. Tasks call services and services queue tasks by name
(annotation.jobs.queue); models import nothing from providers. The notion of
a cycle is the one of the shared review hook (a module per .py file outside
tests, migrations, benchmarks and static files; ``from a.b import c`` is an
edge to ``a.b.c`` when that is a module, else to ``a.b``; a package importing
its own submodules is not a cycle), rebuilt here so the test needs nothing
outside the repository.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = frozenset((".venv", "node_modules", ".git", "tests", "migrations", "benchmarks", "static", "data",
                       "__pycache__"))


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the project."""
    modules = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        for path in sorted(folder.iterdir()):
            if path.is_dir():
                if path.name not in SKIP_DIRS and not path.name.startswith("."):
                    stack.append(path)
            elif path.suffix == ".py":
                name = ".".join(path.relative_to(root).with_suffix("").parts)
                modules[name.removesuffix(".__init__")] = path
    return modules


def _imported_names(module: str, path: Path) -> Iterable[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the project modules it imports (longest known prefix of each name)."""
    modules = project_modules(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in _imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def import_cycles(root: Path) -> list[list[str]]:
    cycles = []
    for component in strongly_connected(import_graph(root)):
        # A package importing its own submodules is not a cycle of modules.
        modules = [m for m in component if not any(o != m and o.startswith(m + ".") for o in component)]
        if len(modules) > 1:
            cycles.append(modules)
    return sorted(cycles)


def test_no_import_cycles_between_the_projects_modules():
    cycles = import_cycles(ROOT)
    assert not cycles, f"{len(cycles)} import cycles:\n" + "\n".join("cycle: " + " <-> ".join(c) for c in cycles)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_an_import_inside_a_function_closes_a_cycle(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/services.py": "def queue():\n    from app.tasks import job\n",
        "app/tasks.py": "from app import services\n",
        "app/models.py": "from . import services\n",  # one way only: no cycle
        "tests/test_app.py": "from app import tasks\nfrom tests import test_app\n",  # tests are not modules here
    })
    assert import_cycles(tmp_path) == [["app.services", "app.tasks"]]


def test_relative_imports_and_long_cycles_are_followed(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/a.py": "from .b import x\n",
        "app/b.py": "from app.sub import c\n",
        "app/sub/__init__.py": "",
        "app/sub/c.py": "from ..a import y\nimport app.d\n",
        "app/d.py": "import json\n",
    })
    assert import_cycles(tmp_path) == [["app.a", "app.b", "app.sub.c"]]


def test_a_package_importing_its_own_submodules_is_no_cycle(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.impl import run\n",
        "pkg/impl.py": "import pkg\n",
    })
    assert import_cycles(tmp_path) == []


# The apps in dependency order (docs/architecture.md): each may import those
# before it, never those after it. ``reasonaudit`` (settings, Celery app, URL
# root) is the project's frame and is left out.
APP_LAYERS = ("reasonlib", "annotation", "runs", "subjects", "judges", "scoring", "agreement", "abstraction", "fidelity",
              "faithfulness", "anchors", "search", "demo")


def upward_imports(graph: dict[str, set[str]], layers: Sequence[str]) -> list[str]:
    rank = {app: i for i, app in enumerate(layers)}
    found = []
    for module, imported in sorted(graph.items()):
        app = module.split(".")[0]
        for target in sorted(imported):
            other = target.split(".")[0]
            if app in rank and other in rank and rank[other] > rank[app]:
                found.append(f"{module} -> {target} ({app} must not import {other})")
    return found


def test_apps_depend_on_each_other_one_way_only():
    wrong = upward_imports(import_graph(ROOT), APP_LAYERS)
    assert not wrong, "imports against the apps' order " + " < ".join(APP_LAYERS) + ":\n" + "\n".join(wrong)


def test_the_layer_check_reports_an_upward_import():
    graph = {"low.views": {"high.models"}, "high.models": {"low.models"}, "low.models": set()}
    assert upward_imports(graph, ("low", "high")) == ["low.views -> high.models (low must not import high)"]


# Pure packages: the shared reasoning library and the apps' formula cores import no Django and no app
# module; they may use the library and each other (docs/architecture.md).
PURE_PACKAGES = ("reasonlib", "scoring.core", "agreement.core", "abstraction.core", "fidelity.core",
                 "faithfulness.core", "anchors.core", "subjects.core", "search.core")


def _is_pure(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in PURE_PACKAGES)


def test_pure_cores_import_only_the_reasoning_library_and_other_cores():
    graph = import_graph(ROOT)
    wrong = []
    for module, path in project_modules(ROOT).items():
        if not _is_pure(module):
            continue
        wrong += [f"{module} imports {name}" for name in _imported_names(module, path)
                  if name.split(".")[0] in ("django", "rest_framework", "celery")]
        wrong += [f"{module} imports {target}" for target in graph[module]
                  if not _is_pure(target) and target.split(".")[0] not in PURE_PACKAGES]
    assert not wrong, "pure cores must import only reasonlib and other cores:\n" + "\n".join(sorted(set(wrong)))
