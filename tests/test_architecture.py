"""The structure docs/architecture.md describes, checked: imports go one way, and policy,
backend and allocator names are compared only where they are registered."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ops", "engine", "allocator", "planner", "ga", "zoo")
def policy_names() -> list[str]:
    """Every registered policy (planner.policies registers them), not a list kept here."""
    import planner.policies  # noqa: F401
    from planner.policy import names
    return names()
BACKEND_NAMES = ("cpu", "cuda")


def sources(*packages):
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


def compares_with(path: Path, names) -> list[str]:
    """Lines comparing a string literal from ``names`` with ==, != or in."""
    quoted = "|".join(re.escape(n) for n in names)
    pattern = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({quoted})["']|["']({quoted})["']\s*(==|!=|\bin\b)""")
    return [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_imports_go_one_way():
    allowed = {"ops": {"ops"}, "allocator": {"allocator", "engine"}, "zoo": {"zoo", "engine", "ops"},
               "planner": {"planner", "allocator", "engine", "ops"},
               "ga": {"ga", "planner", "allocator", "engine", "ops"},
               "engine": {"engine", "ops"}}
    bad = []
    for package, ok in allowed.items():
        for path in sources(package):
            if package == "engine" and on_top(path):
                continue            # the command line, the library it shares with the Python API, and that API
            extra = imported_packages(path) - ok
            if extra:
                bad.append(f"{path.relative_to(ROOT)} imports {sorted(extra)}")
    assert not bad, "\n".join(bad)


ENTRY_POINTS = ("train.py", "infer.py", "serve.py", "stream_train.py", "warmup.py")     # engine/: the `python -m` shims


def on_top(path: Path) -> bool:
    """engine/cli/, engine/library/ and engine/api.py: they sit on top and may import everything."""
    parts = path.relative_to(ROOT).parts
    return parts[0] == "engine" and (parts[1] in ("cli", "library") or parts[1] == "api.py")


def imports_module(path: Path, module: str) -> bool:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(n == module or n.startswith(module + ".") for n in names):
            return True
    return False


def test_only_the_command_line_and_its_entry_points_import_it():
    bad = []
    for path in [*sources(*PACKAGES), *sources("bench")]:
        parts = path.relative_to(ROOT).parts
        if parts[:2] == ("engine", "cli") or (parts[0] == "engine" and len(parts) == 2 and parts[1] in ENTRY_POINTS):
            continue
        if imports_module(path, "engine.cli"):
            bad.append(str(path.relative_to(ROOT)))
    assert not bad, "import engine/cli (the command line) from: " + ", ".join(bad)


def test_policy_names_are_compared_only_in_the_planner():
    bad = [hit for path in sources("engine", "ga", "allocator", "zoo", "ops") for hit in compares_with(path, policy_names())]
    assert not bad, "\n".join(bad)


def test_backend_names_are_compared_only_in_the_backend_registry():
    registry = ROOT / "engine" / "backend_registry.py"
    bad = [hit for path in sources(*PACKAGES) if path != registry for hit in compares_with(path, BACKEND_NAMES)]
    assert not bad, "\n".join(bad)


def allocator_names() -> list[str]:
    from allocator import registry
    return registry.names()


def compares_allocator(path: Path, names) -> list[str]:
    """Comparisons (==, !=, in, not in) of a string literal from ``names`` with anything, and
    the definition of a module-level constant holding one. "auto" also names a --backend,
    --window and --ray-address choice: it counts where the other side mentions an allocator."""
    tree = ast.parse(path.read_text())
    hits = []

    def literal(node):
        return node.value if isinstance(node, ast.Constant) and node.value in names else None

    def literals(node):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [v for v in map(literal, node.elts) if v is not None]
        found = literal(node)
        return [] if found is None else [found]

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for a, b in zip(sides, sides[1:]):
                for side, other in ((a, b), (b, a)):
                    for name in literals(side):
                        if name != "auto" or "alloc" in ast.unparse(other).lower():
                            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    for node in tree.body:
        if isinstance(node, ast.Assign) and literal(node.value) is not None and any(
                isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(hits))


def test_allocator_names_are_compared_only_in_the_allocator_registry():
    registry = ROOT / "allocator" / "registry.py"
    names = allocator_names()
    assert {"auto", "pool", "bestfit", "va"} <= set(names)
    bad = [hit for path in [*sources(*PACKAGES), *sources("bench")] if path != registry
           for hit in compares_allocator(path, names)]
    assert not bad, "\n".join(bad)


def test_the_allocator_comparison_finder_finds_comparisons():
    probe = ROOT / "tests" / "_probe_allocator_names.py"
    probe.write_text('POOL = "pool"\nif request.allocator == "va":\n    pass\nif name in ("bestfit", "x"):\n'
                     '    pass\nif cfg.allocator != "auto":\n    pass\nif window == "auto":\n    pass\n'
                     'x = "pool of workers"\nmake("va")\n')
    try:
        assert len(compares_allocator(probe, ["auto", "pool", "bestfit", "va"])) == 4
    finally:
        probe.unlink()


def test_the_comparison_finder_finds_comparisons(tmp_path):
    probe = ROOT / "tests" / "_probe_architecture.py"
    probe.write_text('if policy == "ideal":\n    pass\nif "cuda" != name:\n    pass\nx = "ideal policy"\n')
    try:
        assert len(compares_with(probe, policy_names())) == 1 and len(compares_with(probe, BACKEND_NAMES)) == 1
    finally:
        probe.unlink()


def test_the_code_map_names_files_that_exist():
    """Every path docs/architecture.md names (a backticked token with a slash: `ops/conv.py`,
    `engine/backends/`, `policies/smartswap.py` within planner, `engine/backends/nvrtc.FAMILIES`)
    exists, and a named attribute is defined in its module: the checklists stay true."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    bases = [ROOT, *(ROOT / p for p in PACKAGES), ROOT / "engine" / "backends"]
    missing = []
    for token in sorted(set(re.findall(r"`([\w./]+/[\w./]*)`", text))):
        if token.startswith("swapengine."):         # a file format's name (swapengine.program/3)
            continue
        path, attr = token, None
        head, dot, tail = token.rpartition(".")
        if dot and tail not in ("py", "cu", "json", "md", "txt") and "/" not in tail:
            path, attr = head + ".py", tail
        found = next((b / path for b in bases if (b / path).exists()), None)
        if found is None:
            missing.append(token)
        elif attr is not None and not re.search(rf"^\s*(def |class )?{re.escape(attr)}\b", found.read_text(), re.M):
            missing.append(token)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
