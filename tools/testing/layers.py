#!/usr/bin/env python3
"""The module layering of Package.swift, checked.

Package.swift's header comment lists the layers, bottom up, one a line:

    //   1. C bindings: COpenSSL, CSQLite, ...
    //   2. values, no I/O: TapCore, ...

A module may import, and name in its `dependencies:`, only modules of a lower layer. This reads the layer lines, each
target's `dependencies:` in Package.swift and the `import` lines of Sources/<module>/*.swift, and fails (exit 1, one
line a problem) when a module reaches up or sideways, imports a module it does not declare, or a target is in no layer
(so a new module cannot slip past the check); and when a test target (Tests/<name>) imports one of ours it does not
name in its `dependencies:` (SwiftPM builds it anyway while another dependency brings the module along). `--root DIR` checks another tree (the tests use a copy).
"""
import os
import re
import sys

LAYER_LINE = re.compile(r"^//\s+(\d+)\.\s+[^:]+:\s+(.+)$")
TARGET = re.compile(r"\.(?:target|executableTarget|systemLibrary)\(\s*name:\s*\"([A-Za-z0-9_]+)\"")
TEST_TARGET = re.compile(r"\.testTarget\(\s*name:\s*\"([A-Za-z0-9_]+)\",\s*dependencies:\s*\[([^\]]*)\]")
IMPORT = re.compile(r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z0-9_]+)")


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    if len(argv) == 3 and argv[1] == "--root":
        root = argv[2]
    elif len(argv) != 1:
        print("usage: layers.py [--root DIR]", file=sys.stderr)
        return 2
    root = os.path.normpath(root)
    with open(os.path.join(root, "Package.swift"), encoding="utf-8") as f:
        package = f.read()

    layers = {}  # module -> (number, line)
    problems = []
    for line in package.splitlines():
        m = LAYER_LINE.match(line)
        if not m:
            continue
        for name in (n.strip() for n in m.group(2).split(",")):
            if not re.fullmatch(r"[A-Za-z0-9_]+", name):
                problems.append(f"Package.swift: layer {m.group(1)}: '{name}' is not a module name")
            elif name in layers:
                problems.append(f"Package.swift: {name} is in layer {layers[name]} and in layer {m.group(1)}")
            else:
                layers[name] = int(m.group(1))
    if not layers:
        print("layers: Package.swift's header has no layer lines ('//   N. what: ModuleA, ModuleB')")
        return 1

    # Each product target (not the test targets, nor test support under Tests/) and its declared dependencies.
    declared = {}
    for m in TARGET.finditer(package):
        name = m.group(1)
        # The call's text up to its closing parenthesis at depth 0.
        depth, i = 0, m.start()
        while i < len(package):
            c = package[i]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        call = package[m.start():i]
        if re.search(r"path:\s*\"Tests/", call):
            continue  # test support (TapTestSupport) is not part of the product
        deps = re.search(r"dependencies:\s*\[([^\]]*)\]", call)
        declared[name] = set(re.findall(r"\"([A-Za-z0-9_]+)\"", deps.group(1))) if deps else set()
        if name not in layers:
            problems.append(f"Package.swift: target {name} is in no layer of the header comment")
    for name in layers:
        if name not in declared:
            problems.append(f"Package.swift: layer line names {name}, which is no target")

    def check(module, other, where):
        if other not in layers or module not in layers:
            return
        if layers[other] >= layers[module]:
            problems.append(f"{where}: {module} (layer {layers[module]}) uses {other} (layer {layers[other]}): "
                            f"a module uses only modules of a lower layer")

    for module, deps in sorted(declared.items()):
        for dep in sorted(deps):
            check(module, dep, f"Package.swift: {module}'s dependencies")

    sources = os.path.join(root, "Sources")
    for module in sorted(declared):
        folder = os.path.join(sources, module)
        if not os.path.isdir(folder):
            continue
        for dirpath, _, files in os.walk(folder):
            for file in sorted(files):
                if not file.endswith(".swift"):
                    continue
                path = os.path.join(dirpath, file)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = IMPORT.match(line)
                        if not m or m.group(1) not in layers:
                            continue  # Foundation, Glibc, XCTest ...: not ours
                        where = f"{os.path.relpath(path, root)}:{number}"
                        other = m.group(1)
                        check(module, other, where)
                        if other != module and other not in declared[module]:
                            problems.append(f"{where}: {module} imports {other}, which its dependencies in Package.swift "
                                            f"do not name")

    # Test targets: what they import of ours (modules and test support) must be in their dependencies.
    ours = set(layers) | {m.group(1) for m in TARGET.finditer(package)}
    for m in TEST_TARGET.finditer(package):
        name, deps = m.group(1), set(re.findall(r"\"([A-Za-z0-9_]+)\"", m.group(2)))
        folder = os.path.join(root, "Tests", name)
        for dirpath, _, files in os.walk(folder):
            for file in sorted(f for f in files if f.endswith(".swift")):
                path = os.path.join(dirpath, file)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        i = IMPORT.match(line)
                        if i and i.group(1) in ours and i.group(1) not in deps:
                            problems.append(f"{os.path.relpath(path, root)}:{number}: {name} imports {i.group(1)}, which its "
                                            f"dependencies in Package.swift do not name")

    if problems:
        for p in problems:
            print(f"layers: {p}")
        return 1
    counts = {}
    for name, n in layers.items():
        counts.setdefault(n, []).append(name)
    print("layers: ok (" + "; ".join(f"{n}: {len(counts[n])} modules" for n in sorted(counts)) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
