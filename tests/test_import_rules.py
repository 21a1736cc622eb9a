"""The shape of the package, enforced: every import of `pensieve/` walked with `ast`.

Three rules, stated in docs/architecture.md ("Who may import whom"), whose layer table this
test reads rather than repeats:
- from outside a subpackage only what its `__init__` lists in `__all__` is imported;
- no module imports a module of a layer below its own (type-checking imports exempt);
- no import cycle, counting the imports inside functions (and the package `__init__` an
  import of a submodule runs first).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pensieve"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the module imported (the most specific module that exists)
    name: str | None  # `from target import name`: the name, when it is not a module
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.source} (line {self.line}) imports {what}"


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = _type_checking_nodes(tree)
    is_package = path.name == "__init__.py"
    found: list[Import] = []
    for node in ast.walk(tree):
        typed = id(node) in type_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pensieve":
                    found.append(Import(module, _existing(alias.name, modules), None, node.lineno, typed))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            if base.split(".")[0] != "pensieve":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    found.append(Import(module, full, None, node.lineno, typed))
                else:
                    found.append(Import(module, _existing(base, modules), alias.name, node.lineno, typed))
    return found


def _existing(name: str, modules: dict[str, Path]) -> str:
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def _all_imports() -> list[Import]:
    modules = _modules()
    return [imp for module, path in modules.items() for imp in _imports_of(module, path, modules)]


def _declared_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [str(v) for v in ast.literal_eval(value)]
    return None


def _subpackages(modules: dict[str, Path]) -> list[str]:
    return [m for m, p in modules.items() if p.name == "__init__.py" and m != "pensieve"]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ---------------------------------------------------------------- the layer table of the doc


def _layer_table(text: str) -> list[tuple[int, str, list[str]]]:
    """(number, name, modules) of each row of the doc's "Who may import whom" table."""
    section = text.split("## Who may import whom", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            names = re.findall(r"`([^`]+)`", cells[2])
            rows.append((int(cells[0]), cells[1], [n if n == "pensieve" else f"pensieve.{n}" for n in names]))
    return rows


def _layer_of(module: str, table: list[tuple[int, str, list[str]]]) -> tuple[int, str, str] | None:
    """(layer number, layer name, the table's entry) for the most specific entry naming module."""
    best: tuple[int, str, str] | None = None
    for number, name, entries in table:
        for entry in entries:
            if _inside(module, entry) and (best is None or len(entry) > len(best[2])):
                best = (number, name, entry)
    return best


def _layer_violations(imports: list[Import], table: list[tuple[int, str, list[str]]]) -> list[str]:
    found = []
    for imp in imports:
        if imp.type_only:
            continue
        source, target = _layer_of(imp.source, table), _layer_of(imp.target, table)
        assert source is not None and target is not None
        if target[0] > source[0]:
            found.append(f"{imp}: layer {source[0]} ({source[1]}) may not import layer {target[0]} ({target[1]})")
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _runtime_edges(imports: list[Import]) -> dict[str, set[str]]:
    """Who imports whom when the code runs: module- and function-level imports, and the
    package `__init__` that importing a submodule from outside its package runs first."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.type_only or imp.target == imp.source:
            continue
        edges.setdefault(imp.source, set()).add(imp.target)
        parent = imp.target.rpartition(".")[0]
        while parent and parent != "pensieve" and not _inside(imp.source, parent):
            edges[imp.source].add(parent)
            parent = parent.rpartition(".")[0]
    return edges


# ---------------------------------------------------------------- the rules


def test_every_subpackage_says_what_it_exports() -> None:
    modules = _modules()
    missing = [p for p in _subpackages(modules) if _declared_all(modules[p]) is None]
    assert missing == [], f"subpackages without __all__ in their __init__: {missing}"
    for package in _subpackages(modules):
        declared = _declared_all(modules[package]) or []
        tree = ast.parse(modules[package].read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{package}/__init__.py says nothing of what the package owns"
        for name in declared:
            defined = f"{package}.{name}" in modules or re.search(
                rf"\b{re.escape(name)}\b", modules[package].read_text()
            )
            assert defined, f"{package}.__all__ names {name!r}, which is neither a module nor defined there"


def _export_violations(imports: list[Import], modules: dict[str, Path]) -> list[str]:
    exports = {p: set(_declared_all(modules[p]) or []) for p in _subpackages(modules)}
    wrong = []
    for imp in imports:
        for package, names in exports.items():
            if _inside(imp.source, package) or not _inside(imp.target, package):
                continue
            if imp.target == package:
                if imp.name is not None and imp.name not in names:
                    wrong.append(f"{imp}: {package}.__all__ does not export {imp.name!r}")
            else:  # a module of the package (or of a package inside it)
                first = imp.target[len(package) + 1 :].split(".")[0]
                if first not in names:
                    wrong.append(f"{imp}: {package}.__all__ does not list the module {first!r}")
    return wrong


def test_from_outside_a_subpackage_only_its_exports_are_imported() -> None:
    wrong = _export_violations(_all_imports(), _modules())
    assert wrong == [], "\n".join(wrong)


def test_the_layer_table_places_every_module_once() -> None:
    table = _layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert [number for number, _name, _entries in table] == list(range(1, len(table) + 1))
    entries = [entry for _number, _name, names in table for entry in names]
    assert len(entries) == len(set(entries)), "an entry stands in two layers"
    modules = _modules()
    assert [e for e in entries if e not in modules] == [], "the table names modules that do not exist"
    assert [m for m in modules if _layer_of(m, table) is None] == [], "modules in no layer"
    top_level = [m for m, p in modules.items() if m.count(".") == 1 and p.name not in ("__init__.py", "__main__.py")]
    assert len(top_level) <= 12, f"the top level holds {len(top_level)} modules: {sorted(top_level)}"


def test_no_module_imports_a_layer_below_its_own() -> None:
    table = _layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    found = _layer_violations(_all_imports(), table)
    assert found == [], "\n".join(found)


def test_no_import_cycle_counting_function_level_imports() -> None:
    cycles = _cycles(_runtime_edges(_all_imports()))
    assert cycles == [], f"import cycles: {cycles}"


# ---------------------------------------------------------------- the checker itself


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A tiny package with one violation of each rule: each check names it."""
    package = tmp_path / "pensieve"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Top."""\n')
    (package / "low" / "__init__.py").write_text('"""Low."""\n__all__ = ["public"]\n')
    (package / "low" / "public.py").write_text("def f() -> None:\n    from pensieve import high\n")
    (package / "low" / "private.py").write_text("")
    (package / "high.py").write_text("from pensieve.low import public\nfrom pensieve.low.private import x\n")
    modules = _modules(package)
    imports = [imp for module, path in modules.items() for imp in _imports_of(module, path, modules)]
    table = _layer_table("## Who may import whom\n| 1 | low | `low` | |\n| 2 | high | `high` `pensieve` | |\n")
    assert [v.split(":")[0] for v in _layer_violations(imports, table)] == [
        "pensieve.low.public (line 2) imports pensieve.high"
    ]
    assert _cycles(_runtime_edges(imports)) == [["pensieve.high", "pensieve.low.public"]]
    assert [v.split(":")[0] for v in _export_violations(imports, modules)] == [
        "pensieve.high (line 2) imports pensieve.low.private.x"
    ]


@pytest.mark.parametrize("text", ["if TYPE_CHECKING:\n    from pensieve import high\n"])
def test_type_checking_imports_are_exempt_from_layers_and_cycles(tmp_path: Path, text: str) -> None:
    package = tmp_path / "pensieve"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("from typing import TYPE_CHECKING\n" + text)
    (package / "high.py").write_text("from pensieve import low\n")
    modules = _modules(package)
    imports = [imp for module, path in modules.items() for imp in _imports_of(module, path, modules)]
    table = _layer_table("## Who may import whom\n| 1 | low | `low` `pensieve` | |\n| 2 | high | `high` | |\n")
    assert _layer_violations(imports, table) == []
    assert _cycles(_runtime_edges(imports)) == []
