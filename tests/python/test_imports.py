"""The package's import structure, without a mount: the modules of tools/python/clairfs import
one another without a cycle, each imports alone in a fresh interpreter, and every public name
of `clairfs` resolves.

The import graph is read from the source (every `import` and `from ... import` of a module of
the package, at any depth: inside functions and `if TYPE_CHECKING:` too), so a cycle that only
a lazy import closes is found as well. Importing a submodule runs the package's __init__ first
in Python; that implicit arrow is not an edge here, the explicit ones of __init__ are.
"""
import ast
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "python", "clairfs")
PACKAGE = "clairfs"

try:
    import torch  # noqa: F401
    TORCH_MISSING = None
except ImportError as e:
    TORCH_MISSING = f"torch not importable: {e}"


def package_modules():
    """The module names of the package ("__init__", "control", ...), sorted."""
    return sorted(f[:-3] for f in os.listdir(PACKAGE_DIR) if f.endswith(".py"))


def imported_modules(name, modules):
    """The modules of the package that module `name` imports anywhere in its source."""
    with open(os.path.join(PACKAGE_DIR, name + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=name + ".py")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:  # absolute: `from clairfs.x import y` or `from clairfs import x`
                parts = (node.module or "").split(".")
                if parts[0] != PACKAGE:
                    continue
                rest = parts[1:]
            elif node.level == 1:  # relative to the package: `from .x import y`, `from . import x`
                rest = node.module.split(".") if node.module else []
            else:
                raise AssertionError(f"{name}: an import above the package (level {node.level})")
            if rest:
                found.add(rest[0])
            else:  # `from . import x, y`: the names are modules (or names of __init__)
                found.update(a.name for a in node.names if a.name in modules)
    found.discard(name)
    unknown = found - set(modules)
    if unknown:
        raise AssertionError(f"{name} imports {sorted(unknown)}, not modules of the package")
    return found


def find_cycle(graph):
    """A list of modules forming a cycle of `graph` (module -> set of modules), or None."""
    state = {}  # module -> "open" while on the current path, "done" after
    path = []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle:
                    return cycle
        path.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            if cycle:
                return cycle
    return None


class ImportGraphTest(unittest.TestCase):
    def test_finder_sees_a_cycle(self):
        # The checker itself: a two-module cycle and a self-contained chain.
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])
        self.assertIsNone(find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}))

    def test_no_import_cycle(self):
        modules = package_modules()
        graph = {m: imported_modules(m, modules) for m in modules}
        self.assertIn("compact", graph["control"])  # the lazy import is seen
        cycle = find_cycle(graph)
        self.assertIsNone(cycle, f"import cycle in the package: {' -> '.join(cycle or [])}")

    def test_each_module_imports_alone(self):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(PACKAGE_DIR), PYTHONDONTWRITEBYTECODE="1")
        for m in package_modules():
            if m == "__main__" or (m == "torch_order" and TORCH_MISSING):
                continue  # __main__ runs the command line; torch_order needs torch
            with self.subTest(module=m):
                target = PACKAGE if m == "__init__" else f"{PACKAGE}.{m}"
                done = subprocess.run([sys.executable, "-c", f"import {target}"], env=env,
                                      capture_output=True, text=True, timeout=120)
                self.assertEqual(done.returncode, 0, done.stderr)

    def test_public_names_resolve(self):
        import clairfs
        from clairfs import control
        torch_names = set(clairfs._TORCH_NAMES)
        for name in clairfs.__all__:
            if name in torch_names and TORCH_MISSING:
                continue
            with self.subTest(name=name):
                self.assertIsNotNone(getattr(clairfs, name))
        # The line rules keep their names in control, where callers found them before.
        for name in ("manifest_line", "check_stream_name", "MAX_STREAM_NAME", "StrPath", "Item"):
            self.assertTrue(hasattr(control, name), name)

    def test_lazy_names_are_their_modules(self):
        # A name `clairfs` imports on first use is the object of the module that defines it,
        # and clairfs.records answers for the parsers' names with the parsers' objects.
        import importlib
        import clairfs
        from clairfs import records
        torch_modules = {"torch_order", "locality"}
        lazy = [(clairfs, n, m) for n, m in clairfs._HOME.items()]
        lazy += [(records, n, m) for n, m in records._PARSERS.items()]
        for where, name, module in lazy:
            if module in torch_modules and TORCH_MISSING:
                continue
            with self.subTest(module=where.__name__, name=name):
                home = importlib.import_module(f"{PACKAGE}.{module}")
                self.assertIs(getattr(where, name), getattr(home, name))
        self.assertEqual(set(clairfs._HOME),
                         {*clairfs._TORCH_NAMES, *clairfs._RECORDS_NAMES, *clairfs._HDF5_NAMES})


if __name__ == "__main__":
    unittest.main()
