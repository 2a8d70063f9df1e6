"""The package's rooms import only downward, no module imports itself back, and no module
is over MAX_LINES lines.

Every import is counted, those inside functions included (an import deferred for start-up
speed is still a dependency). The order of the rooms is docs/architecture.md's.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dreamerjax"
# Bottom first: a module may import its own room and the rooms before it.
ROOMS = ("config", "algo", "data", "envs", "viz", "run", "tools")
# A module past this many lines is split by job into a package (as tools/bench/).
MAX_LINES = 900


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The package's modules that `path` imports anywhere in its body."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name in known:
                found.add(name)
    return found


def room_of(module: str) -> int | None:
    parts = module.split(".")
    return ROOMS.index(parts[1]) if len(parts) > 1 and parts[1] in ROOMS else None


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    # `from dreamerjax.envs import core` names a module; `from dreamerjax.envs import X`
    # with X a function names the package, whose __init__ is then the dependency.
    return {m: {d for d in imports_of(p, known) if d != m and not m.startswith(d + ".")}
            for m, p in mods.items()}


def test_every_module_is_in_a_room():
    loose = [m for m in modules() if m != "dreamerjax" and room_of(m) is None]
    assert not loose, f"modules outside the rooms {ROOMS}: {loose}"


def test_imports_only_downward():
    upward = []
    for module, deps in graph().items():
        mine = room_of(module)
        for dep in deps:
            theirs = room_of(dep)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{module} -> {dep}")
    assert not upward, "imports that run up a room:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    deps = graph()
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(deps.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(deps):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def long_modules(mods: dict[str, Path], limit: int = MAX_LINES) -> dict[str, int]:
    """Module name -> its line count, for every module over `limit` lines."""
    counts = {m: len(p.read_text().splitlines()) for m, p in mods.items()}
    return {m: n for m, n in sorted(counts.items()) if n > limit}


def test_no_module_over_max_lines():
    long = long_modules(modules())
    assert not long, f"modules over {MAX_LINES} lines (split each by job into a package): " + \
        ", ".join(f"{m} ({n} lines)" for m, n in long.items())


def test_long_module_is_named(tmp_path):
    """The count is not vacuous: a file one line over the limit is named, one at it is not."""
    (tmp_path / "over.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "at.py").write_text("x = 1\n" * MAX_LINES)
    mods = {"pkg.over": tmp_path / "over.py", "pkg.at": tmp_path / "at.py"}
    assert long_modules(mods) == {"pkg.over": MAX_LINES + 1}
