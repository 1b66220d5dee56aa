"""The rooms hold: imports point one way (down the list in README's architecture section),
engine and store never import each other, the server and the TUI use the engine's public
API only, no import cycles (nor among packaging/'s scripts), no module over 350 lines, one home
for unit formatting."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "edge_infer"

# Lower rank = lower room. A module may import its own room and rooms of a lower rank;
# rooms of equal rank (engine, store) may not import each other.
RANK = {
    "edge_infer": 0, "errors": 0, "units": 0, "paths": 0, "config": 0,
    "gguf": 1,
    "plan": 2,
    "chat": 3,
    "engine": 4, "store": 4, "remote": 4,
    "host": 5,
    "bench": 6,
    "server": 7,
    "tui": 8,
    "commands": 9,
}
# Rooms above the engine reach it through its package (edge_infer/engine/__init__.py) only.
ENGINE_PUBLIC_ONLY = {"server", "tui"}
MAX_LINES = 350


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every edge_infer module this file imports, at module level or inside a function."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("edge_infer"):
                # `from edge_infer.x import y` imports submodule y, or a name from x itself
                subs = {f"{target}.{a.name}" for a in node.names}
                subs = {m for m in subs if (PACKAGE.parent / Path(*m.split("."))).with_suffix(".py").exists()}
                found |= subs
                if len(subs) < len(node.names):
                    found.add(target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("edge_infer")}
    return found - {mod}


def room(mod: str) -> str:
    parts = mod.split(".")
    name = parts[1] if len(parts) > 1 else parts[0]
    return "commands" if name in ("cli", "__main__") else name  # one wiring room


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {mod: imports_of(path) for mod, path in MODULES.items()}


def test_every_room_has_a_rank():
    assert {room(m) for m in MODULES} <= set(RANK), {room(m) for m in MODULES} - set(RANK)


def test_imports_point_down():
    wrong = []
    for mod, deps in GRAPH.items():
        here = room(mod)
        for dep in deps:
            there = room(dep)
            if there == here:
                continue
            if RANK[there] >= RANK[here] and RANK[there] != 0:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "imports from a lower room to a higher (or a peer):\n" + "\n".join(sorted(wrong))


def test_server_and_tui_use_the_engines_public_api():
    wrong = [f"{mod} -> {dep}" for mod, deps in GRAPH.items() if room(mod) in ENGINE_PUBLIC_ONLY
             for dep in deps if dep.startswith("edge_infer.engine.")]
    assert not wrong, "\n".join(sorted(wrong))


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle a depth-first walk meets, as "a -> b -> a"."""
    state: dict[str, int] = {}
    cycles = []

    def visit(mod: str, stack: list[str]) -> None:
        state[mod] = 1
        stack.append(mod)
        for dep in sorted(graph.get(mod, ())):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[mod] = 2

    for mod in graph:
        if mod not in state:
            visit(mod, [])
    return cycles


def test_no_import_cycles():
    cycles = import_cycles(GRAPH)
    assert not cycles, "\n".join(cycles)


def packaging_imports(path: Path, scripts: set[str]) -> set[str]:
    """The packaging/ scripts this one imports: they import each other by bare name (each puts
    its own folder on sys.path), at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return (found & scripts) - {path.stem}


def test_no_import_cycles_in_packaging():
    scripts = {p.stem: p for p in sorted((PACKAGE.parent / "packaging").glob("*.py"))}
    graph = {name: packaging_imports(path, set(scripts)) for name, path in scripts.items()}
    assert graph["gpu_plugin"] and graph["llama_wheel"]  # the walk sees how these scripts import each other
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_modules_stay_small(mod):
    lines = len(MODULES[mod].read_text().splitlines())
    assert lines <= MAX_LINES, f"{mod} has {lines} lines (at most {MAX_LINES}): split it by job"


def test_units_are_formatted_in_one_place():
    formatter = re.compile(r"^\s*def (human\w*|format_bytes|format_count|_duration|_rate|_eta)\(", re.M)
    elsewhere = [str(p.relative_to(PACKAGE)) for p in MODULES.values()
                 if p.name != "units.py" and formatter.search(p.read_text())]
    assert not elsewhere, f"unit formatters outside edge_infer/units.py: {elsewhere}"
    byte_ladder = re.compile(r"\(\s*\"B\",\s*\"KiB\"")
    assert [p.name for p in MODULES.values() if byte_ladder.search(p.read_text())] == ["units.py"]


# Private names of other libraries that have no public twin, each with its reason.
FOREIGN_PRIVATE = {
    ("edge_infer.engine.native.backend", "_base_path"),  # where llama_cpp loaded libllama from: no public name
    ("edge_infer.bench.defaults", "_exit"),  # os._exit: how a forked child ends (documented, public)
}


def own_private_names(tree: ast.AST) -> set[str]:
    """The _names a module defines itself: functions, classes, assignments, attributes it sets
    (self._x = ...), class fields and parameters."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if n.startswith("_")}


def test_a_module_reads_its_own_private_names_only():
    """obj._name and `from x import _name` only where this module defines _name: what another
    module needs is public (or a method), not reached into."""
    wrong = []
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text())
        own = own_private_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                if node.attr not in own and (mod, node.attr) not in FOREIGN_PRIVATE:
                    wrong.append(f"{mod}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edge_infer"):
                wrong += [f"{mod}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not wrong, "\n".join(wrong)


# engine/native/ owns every llama_cpp import; anything else asks it. The exceptions, each with
# its reason (a module path, imports of llama_cpp it may make).
NATIVE = "edge_infer.engine.native"
LLAMA_CPP_ELSEWHERE = {
    # bench: the baseline `bench` compares against is llama-cpp-python's own Llama class as shipped
    "edge_infer.bench.local",
}


def llama_cpp_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "llama_cpp" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "llama_cpp":
            lines.append(node.lineno)
    return lines


def test_only_engine_native_imports_llama_cpp():
    wrong = [f"{mod}:{line}" for mod, path in MODULES.items()
             if not (mod == NATIVE or mod.startswith(NATIVE + ".")) and mod not in LLAMA_CPP_ELSEWHERE
             for line in llama_cpp_imports(path)]
    assert not wrong, "llama_cpp imported outside engine/native/ (ask a native class instead):\n" + "\n".join(wrong)


# The engine's floors: native/ (llama.cpp's handles) at the bottom, devices/ and kv/ above it
# (neither knows the other), the step (engine/*.py) on top. Imports point down or sideways
# within a floor.
ENGINE_FLOORS = {"native": 0, "devices": 1, "kv": 1}
TOP_FLOOR = 2


def engine_floor(mod: str) -> tuple[str, int] | None:
    parts = mod.split(".")
    if parts[:2] != ["edge_infer", "engine"] or len(parts) < 3:
        return None
    name = parts[2] if len(parts) > 3 or parts[2] in ENGINE_FLOORS else "top"
    return name, ENGINE_FLOORS.get(name, TOP_FLOOR)


def test_engine_floors_import_down_only():
    wrong = []
    for mod, deps in GRAPH.items():
        here = engine_floor(mod)
        if here is None or here[0] == "top":
            continue
        for dep in deps:
            there = engine_floor(dep)
            if there is not None and there[0] != here[0] and there[1] >= here[1]:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "engine/ floors import up or sideways:\n" + "\n".join(sorted(wrong))
