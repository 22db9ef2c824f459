#!/usr/bin/env python3
"""The server's layers hold: every include of a server folder from another
one follows the layer graph server/CMakeLists.txt declares (a layer sees its
own folder and the layers it links, transitively, never one above), the
graph runs only downward (each layer names only layers declared before it),
and the wire's protos are included only by the front end and the top.

The build refuses an upward include already (each layer's include path holds
only its own folder); this test also fails when someone widens a layer's
links or include path, and names the file and line.

  layers_test.py --server <server source dir> --graph "core=;regions=core;..."
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Files at the top of server/: above every layer.
TOP_FILES = {"server.cc", "server.h", "main.cc"}
PROTO_LAYERS = {"frontend"}  # besides the top


def parse_graph(text):
    """The layers bottom first, and each one's direct dependencies."""
    order, deps = [], {}
    for entry in filter(None, text.split(";")):
        name, _, names = entry.partition("=")
        below = [d for d in names.split(",") if d]
        for d in below:
            if d not in deps:
                raise SystemExit(f"layer {name} names {d}, which is not declared below it")
        order.append(name)
        deps[name] = below
    return order, deps


def closure(layer, deps):
    seen, todo = set(), list(deps[layer])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(deps[d])
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, type=pathlib.Path)
    parser.add_argument("--graph", required=True)
    args = parser.parse_args()
    order, deps = parse_graph(args.graph)
    problems = []
    folders = {p.name for p in args.server.iterdir() if p.is_dir()}
    for folder in sorted(folders - set(order)):
        if any(args.server.joinpath(folder).glob("*.[ch]*")):
            problems.append(f"server/{folder}/ holds code but is no layer of server/CMakeLists.txt")
    for path in sorted(args.server.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        rel = path.relative_to(args.server)
        layer = rel.parts[0] if len(rel.parts) > 1 else None
        if layer is None and rel.name not in TOP_FILES:
            problems.append(f"server/{rel}: a file at the top of server/ outside every layer")
        allowed = None if layer is None else closure(layer, deps) | {layer}
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            head = target.split("/")[0]
            where = f"server/{rel}:{number}"
            if head == "attnserve" and layer is not None and layer not in PROTO_LAYERS:
                problems.append(f"{where}: includes the wire's protos ({target}) below the front end")
            if head in deps and allowed is not None and head not in allowed:
                problems.append(
                    f"{where}: layer '{layer}' includes {target} of layer '{head}', which is "
                    f"not below it (it may include: {', '.join(sorted(allowed))})")
            if "/" not in target and target.endswith(".h") and layer is not None:
                if (args.server / target).exists():
                    problems.append(f"{where}: includes the top's {target}")
    for p in problems:
        print(p)
    print(f"layers_test: {len(order)} layers ({' < '.join(order)}); "
          f"{'OK' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
