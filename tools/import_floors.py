"""The library's import graph by room: which imports run back up, and which floor each room is on.

A room is a top-level module or a subpackage of `kohaku_rag` (`kohaku_rag.lake.tables`,
`kohaku_rag.answering`); an import is every `import`/`from` in a module, those inside
functions too. Rooms that import each other (directly or round a longer circle) cannot be
on floors; the imports that close such circles, the lightest first (fewest module imports),
are the ones that "run back up". What is left is layered: a room's floor is the longest
chain of rooms below it.

    python tools/import_floors.py                        # rooms by floor, and the upward imports
    python tools/import_floors.py --from answering --to evaluation   # modules of one room importing another
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "kohaku_rag"


def modules(package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, packages named without `__init__`."""
    out = {}
    for path in sorted((REPO / package).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that `name` imports (`from a import b` counts a.b when b is a module)."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in known and m != name}


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def module_edges(package: str = PACKAGE) -> set[tuple[str, str]]:
    known = modules(package)
    return {(m, t) for m, p in known.items() for t in imported(m, p, known)}


def room_edges(edges: set[tuple[str, str]]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(room, room) -> the module imports behind it, rooms distinct."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for a, b in edges:
        if room(a) != room(b) and room(a) != PACKAGE:
            out[(room(a), room(b))].add((a, b))
    return out


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    reach, stack = set(), [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in reach:
                reach.add(nxt)
                stack.append(nxt)
    return reach


def _circle(graph: dict[str, set[str]]) -> set[str] | None:
    """The rooms of one import circle (a strongly connected set of two or more), or None."""
    for start in sorted(graph):
        reach = _reach(graph, start)
        if start in reach:
            return {r for r in reach if start in _reach(graph, r)} | {start}
    return None


def upward(edges: dict[tuple[str, str], set[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The room imports that close circles, removed lightest first until none is left."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    removed = []
    while (circle := _circle(graph)) is not None:
        inside = [(a, b) for a in circle for b in graph[a] if b in circle]
        a, b = min(inside, key=lambda e: (len(edges[e]), e))
        graph[a].discard(b)
        removed.append((a, b))
    return removed


def floors(edges: dict[tuple[str, str], set[tuple[str, str]]], removed: list[tuple[str, str]]) -> dict[str, int]:
    rooms = {room(m) for m in modules()} - {PACKAGE}
    below: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        if (a, b) not in removed:
            below[a].add(b)
    level: dict[str, int] = {}

    def floor(r: str) -> int:
        if r not in level:
            level[r] = 1 + max((floor(b) for b in below[r]), default=-1)
        return level[r]

    return {r: floor(r) for r in sorted(rooms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", help="a room, e.g. answering")
    parser.add_argument("--to", dest="target", help="a room, e.g. evaluation")
    args = parser.parse_args()
    edges = module_edges()
    if args.source and args.target:
        a, b = f"{PACKAGE}.{args.source}", f"{PACKAGE}.{args.target}"
        importers = sorted({m for m, t in edges if room(m) == a and room(t) == b})
        print(f"{len(importers)} modules of {a} import {b}")
        for m in importers:
            print(f"  {m}")
        return
    by_room = room_edges(edges)
    removed = upward(by_room)
    level = floors(by_room, removed)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules().values())
    print(f"{lines} lines, {len(modules())} modules, {len(level)} rooms on {max(level.values()) + 1} floors")
    for f in range(max(level.values()) + 1):
        print(f"  floor {f:>2}: {', '.join(r.removeprefix(PACKAGE + '.') for r, v in level.items() if v == f)}")
    print(f"{len(removed)} room imports run back up:")
    for a, b in removed:
        for m, t in sorted(by_room[(a, b)]):
            print(f"  {m} -> {t}")


if __name__ == "__main__":
    main()
