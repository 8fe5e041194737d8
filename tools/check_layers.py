#!/usr/bin/env python3
"""The layer rule of docs/architecture.md, checked on every build: a source file may include
the project's headers only from its own unit and from the units below it.

LAYERS names each unit (a folder) and the units it stands on directly; what those stand on is
allowed too. The folders ABOVE (daemon/, slurm/, tools/, tests/: the programs on top of the
layers, and the tests) may include anything, and no layer may include them. The build runs
this script (meson.build, target `layers`) and fails on the first wrong-way include, with the
file, the line and the rule it breaks.

Usage: check_layers.py ROOT [--stamp FILE --depfile FILE]"""
import argparse
import os
import re
import sys

# unit: the units it may include directly (lowest first in the picture of docs/architecture.md)
LAYERS = {
    "cache/base": [],
    "cache/backing": ["cache/base"],
    "cache/manifest": ["cache/base"],
    "cache/plan": ["cache/base", "cache/backing", "cache/manifest"],
    "cache/tiers": ["cache/base"],
    "cache/prefetch": ["cache/base", "cache/backing", "cache/plan", "cache/tiers"],
    "fs/core": ["cache/prefetch"],
    "fs/fresh": ["fs/core"],
    "batch": ["fs/core"],
    "batch/client": ["batch"],
    "control": ["cache/prefetch", "fs/fresh", "cluster", "batch"],
    "fs": ["fs/core", "control"],
    "cluster": ["cache/prefetch"],
    "conf": ["cache/prefetch", "fs", "cluster"],
}
# Above every layer: the daemon, the Slurm integration, the development tools and benchmarks,
# and the tests.
ABOVE = ("daemon", "slurm", "tools", "tests")
SOURCE = (".h", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed(unit):
    """The units `unit` may include: itself and everything below it."""
    seen, todo = {unit}, list(LAYERS[unit])
    while todo:
        u = todo.pop()
        if u not in seen:
            seen.add(u)
            todo.extend(LAYERS[u])
    return seen


def unit_of(path):
    """The unit a repository-relative path belongs to (the longest folder named), or None."""
    best = None
    for unit in LAYERS:
        if path == unit or path.startswith(unit + "/"):
            if best is None or len(unit) > len(best):
                best = unit
    return best


def check(root):
    """Returns ([violation lines], [files scanned])."""
    problems, scanned = [], []
    tops = sorted({u.split("/")[0] for u in LAYERS})
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                unit = unit_of(rel)
                if unit is None:
                    continue
                scanned.append(full)
                ok = allowed(unit)
                with open(full, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = unit_of(m.group(1))
                        if target is not None and target not in ok:
                            problems.append(f"{rel}:{n}: includes {m.group(1)}, but {unit} may "
                                            f"include only {', '.join(sorted(ok))}")
                        elif target is None and "/" in m.group(1) and \
                                m.group(1).split("/")[0] in ABOVE:
                            problems.append(f"{rel}:{n}: includes {m.group(1)}, above every "
                                            f"layer ({unit} may include only "
                                            f"{', '.join(sorted(ok))})")
    return problems, scanned


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--stamp")
    ap.add_argument("--depfile")
    args = ap.parse_args()
    problems, scanned = check(args.root)
    if problems:
        print("wrong-way includes (the layer rule: tools/check_layers.py, docs/architecture.md):",
              file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    if args.depfile:
        with open(args.depfile, "w", encoding="utf-8") as f:
            f.write(f"{args.stamp}: " + " ".join(s.replace(" ", "\\ ") for s in scanned) + "\n")
    if args.stamp:
        with open(args.stamp, "w", encoding="utf-8") as f:
            f.write(f"{len(scanned)} files follow the layer rule\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
