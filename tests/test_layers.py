"""The house is one-way: each layer imports only the layers below it (docs/architecture.md).

core ← accounts ← webhooks ← catalog ← sizing ← quotes ← orders ← billing ← provisioning. Views,
API views, admin, URL confs, template tags and management commands sit on top and may import any
layer. The check reads every import in the source (module level and inside functions, so an import moved
into a function to dodge a cycle is caught too), and the import graph has no cycle, neither at
module level nor through imports inside functions.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS = ["portal.core", "portal.accounts", "portal.webhooks", "portal.catalog", "portal.sizing",
          "portal.quotes", "portal.orders", "portal.billing", "provisioning"]
ON_TOP = {"views.py", "urls.py", "admin.py", "apps.py"}
ON_TOP_DIRS = {"migrations", "management", "templatetags"}


def _layer(module: str) -> int | None:
    for rank, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources():
    for package in ("portal", "provisioning"):
        yield from sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path, *, module_level_only: bool):
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return _imports_in(path.read_text(), package=package, module_level_only=module_level_only)


def _imports_in(source: str, *, package: str, module_level_only: bool):
    tree = ast.parse(source)
    nodes = tree.body if module_level_only else ast.walk(tree)
    for node in nodes:
        yield from _targets(node, package)


def _targets(node: ast.AST, package: str):
    """(line, module) for each module an import statement names (none for another node)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        yield node.lineno, base
        for alias in node.names:  # `from portal.quotes import models` names a module
            yield node.lineno, f"{base}.{alias.name}"


def _upward_imports(module: str, source: str) -> list[str]:
    own = _layer(module)
    package = module.rpartition(".")[0]
    return [f"{module}:{lineno} imports {target}"
            for lineno, target in _imports_in(source, package=package, module_level_only=False)
            if own is not None and (_layer(target) or 0) > own]


def _is_on_top(path: Path) -> bool:
    rel = path.relative_to(ROOT)
    return (path.name in ON_TOP or bool(ON_TOP_DIRS & set(rel.parts))
            or rel.parts[:2] == ("portal", "api"))


def test_no_layer_imports_a_layer_above_it():
    wrong = [line for path in _sources() if not _is_on_top(path)
             for line in _upward_imports(_module_name(path), path.read_text())]
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(set(wrong)))


def test_orders_import_nothing_from_provisioning():
    wrong = [f"{path.relative_to(ROOT)}:{lineno} imports {target}"
             for path in (ROOT / "portal" / "orders").rglob("*.py")
             if path.name not in {"views.py", "urls.py"}
             for lineno, target in _imports(path, module_level_only=False)
             if target == "provisioning" or target.startswith("provisioning.")]
    assert not wrong, "\n".join(wrong)


def test_the_staff_console_sits_on_top_of_provisioning():
    """The staff console (``provisioning/staff/``) uses every room; no room uses it. Only URL
    confs, views and template tags, which sit on top, may reach into it."""
    wrong = [f"{path.relative_to(ROOT)}:{lineno} imports {target}"
             for path in _sources()
             if "staff" not in path.relative_to(ROOT).parts[:2] and not _is_on_top(path)
             for lineno, target in _imports(path, module_level_only=False)
             if target == "provisioning.staff" or target.startswith("provisioning.staff.")]
    assert not wrong, "\n".join(wrong)


def test_the_module_level_import_graph_has_no_cycle():
    # A module naming its own package (`from . import memory`) is no cycle: the package is
    # already importing when its module runs.
    modules = {_module_name(p): p for p in _sources()}
    graph = {}
    for name, path in modules.items():
        graph[name] = {target for _, target in _imports(path, module_level_only=True)
                       if target in modules and not name.startswith(target + ".")}
    cycles = _cycles(graph)
    assert not cycles, "module-level import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def _tucked_imports(source: str, *, package: str, apps_module: bool = False) -> list[str]:
    """First-party imports anywhere but at a module's top: in a function or a class body; in an
    apps.py, ``AppConfig.ready``'s may (models load after apps; Django's own rule)."""
    tree = ast.parse(source)
    late_ok = {id(node) for cls in tree.body if apps_module and isinstance(cls, ast.ClassDef)
               for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name == "ready"
               for node in ast.walk(fn)}
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    tucked = {id(node): node for scope in ast.walk(tree) if isinstance(scope, scopes)
              for node in ast.walk(scope)
              if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in late_ok}
    return [f"{lineno} imports {target}" for node in tucked.values()
            for lineno, target in _targets(node, package)
            if target.split(".")[0] in ("portal", "provisioning")]


def test_no_import_is_tucked_into_a_function():
    """The house's rule (docs/architecture.md): a module says what it depends on at its top; only
    ``AppConfig.ready`` imports late. A third-party import may wait for its first use (an optional
    extra)."""
    wrong = []
    for path in _sources():
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        wrong += [f"{path.relative_to(ROOT)}:{line}"
                  for line in _tucked_imports(path.read_text(), package=package,
                                              apps_module=path.name == "apps.py")]
    assert not wrong, "imports inside functions or classes:\n" + "\n".join(wrong)


def test_the_tucked_import_check_finds_them_and_spares_only_an_app_configs_ready():
    source = ("import json\ntry:\n    from portal.core import env\nexcept ImportError:\n    env = None\n"
              "\nclass C:\n    from portal.core import units\n\n    def ready(self):\n"
              "        from . import signals\n\n"
              "def ready():\n    from portal.x import y\n\n"
              "def f():\n    import torch\n    from portal.catalog.cache import catalog_rows\n")
    found = [line.split(" ", 1)[1]
             for line in _tucked_imports(source, package="portal.sizing", apps_module=True)]
    assert sorted(found) == sorted(["imports portal.core", "imports portal.core.units", "imports portal.x",
                                    "imports portal.x.y", "imports portal.catalog.cache",
                                    "imports portal.catalog.cache.catalog_rows"])
    assert len(_tucked_imports(source, package="portal.sizing")) == len(found) + 2  # ready's, outside apps.py


def test_no_cycle_even_through_imports_inside_functions():
    """An import moved into a function hides a cycle from the module-level check, not from the
    design: one app's module and another's that import each other are one unit in disguise.
    Only ``AppConfig.ready`` may import late (models load after apps; Django's own rule)."""
    modules = {_module_name(p): p for p in _sources()}
    graph = {}
    for name, path in modules.items():
        if path.name == "apps.py":
            continue
        graph[name] = {target for _, target in _imports(path, module_level_only=False)
                       if target in modules and not name.startswith(target + ".")}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_layer_check_sees_an_upward_import_even_inside_a_function():
    source = "import json\n\ndef f():\n    from provisioning.models import Node\n    return Node\n"
    assert _upward_imports("portal.orders.services", source) == [
        "portal.orders.services:4 imports provisioning.models",
        "portal.orders.services:4 imports provisioning.models.Node"]
    assert _upward_imports("provisioning.inventory.services", source) == []
    assert _upward_imports("portal.sizing.x", "from ..quotes import plans\n") == [
        "portal.sizing.x:1 imports portal.quotes", "portal.sizing.x:1 imports portal.quotes.plans"]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
