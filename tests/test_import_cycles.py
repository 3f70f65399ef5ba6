"""No library module imports itself through others: module-level and function-local imports
count (a lazy import only hides a cycle); imports under ``if TYPE_CHECKING:`` (type names
only, never run) do not."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ops", "engine", "allocator", "planner", "ga", "zoo")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def _type_checking(node: ast.AST) -> bool:
    t = getattr(node, "test", None)
    return isinstance(node, ast.If) and getattr(t, "id", getattr(t, "attr", None)) == "TYPE_CHECKING"


def _imported(name: str, f: Path, mods: dict[str, Path]) -> set[str]:
    """The library modules ``f`` (module ``name``) imports, outside TYPE_CHECKING blocks."""
    tree = ast.parse(f.read_text())
    hidden = {id(n) for b in ast.walk(tree) if _type_checking(b) for s in b.body for n in ast.walk(s)}
    here = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for n in ast.walk(tree):
        if id(n) in hidden:
            continue
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = ".".join(here[:len(here) - n.level + 1]) if n.level else ""
            mod = ".".join(x for x in (base, n.module) if x)
            out.update(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in n.names)
    return {m for m in out if m in mods and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}        # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    return next((c for v in sorted(graph) if v not in state and (c := visit(v))), None)


def test_no_library_module_imports_itself_through_others():
    mods = _modules()
    cycle = _cycle({m: _imported(m, f, mods) for m, f in mods.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_check_sees_a_lazy_cycle_and_not_a_type_only_one():
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    mods = _modules()
    facts = _imported("planner.facts", mods["planner.facts"], mods)
    allocation = _imported("planner.allocation", mods["planner.allocation"], mods)
    assert "planner.allocation" in facts and "planner.facts" not in allocation
