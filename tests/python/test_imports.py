"""The package's import structure, without a mount: the modules of python/clairfs import
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
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "clairfs")
PACKAGE = "clairfs"

try:
    import torch  # noqa: F401
    TORCH_MISSING = None
except ImportError as e:
    TORCH_MISSING = f"torch not importable: {e}"


def package_modules():
    """The modules of the package, named relative to it and sorted: "__init__" for the package
    itself, "control", ..., a subpackage by its name ("ctl") and its modules dotted
    ("ctl.cache")."""
    found = []
    for d, dirs, names in os.walk(PACKAGE_DIR):
        dirs[:] = [n for n in dirs if n != "__pycache__"]
        rel = os.path.relpath(d, PACKAGE_DIR)
        prefix = [] if rel == "." else rel.split(os.sep)
        for n in names:
            if n.endswith(".py"):
                parts = prefix + [n[:-3]]
                if parts[-1] == "__init__" and prefix:
                    parts.pop()  # a subpackage's __init__ is the subpackage
                found.append(".".join(parts))
    return sorted(found)


def module_file(name):
    """The source file of module `name` (a name package_modules() gives)."""
    if name == "__init__":
        return os.path.join(PACKAGE_DIR, "__init__.py")
    path = os.path.join(PACKAGE_DIR, *name.split("."))
    return os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"


def imported_modules(name, modules):
    """The modules of the package that module `name` imports anywhere in its source."""
    with open(module_file(name), encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=module_file(name))
    # The package a relative import starts from: the module's own (itself for an __init__).
    if name == "__init__":
        here = []
    elif module_file(name).endswith("__init__.py"):
        here = name.split(".")
    else:
        here = name.split(".")[:-1]
    known = set(modules)

    def module_of(parts):
        # The longest prefix of `parts` that is a module; [] is the package's __init__.
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in known:
                return ".".join(parts[:n])
        if parts:
            raise AssertionError(f"{name} imports {'.'.join(parts)}, not a module of the package")
        return "__init__"

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1:
                    found.add(module_of(parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:  # absolute: `from clairfs.x import y` or `from clairfs import x`
                parts = (node.module or "").split(".")
                if parts[0] != PACKAGE:
                    continue
                base = parts[1:]
            else:  # relative: `from .x import y`, `from . import x`, `from .. import x`
                if node.level - 1 > len(here):
                    raise AssertionError(f"{name}: an import above the package "
                                         f"(level {node.level})")
                base = here[:len(here) - (node.level - 1)]
                base += node.module.split(".") if node.module else []
            # `from P import x, y`: each name is a module of P, or a name P's __init__ defines
            for a in node.names:
                sub = ".".join(base + [a.name])
                found.add(sub if sub in known else module_of(base))
    found.discard(name)
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
        self.assertIn("ctl.cache", graph["ctl"])  # a subpackage's modules, relative imports
        self.assertIn("predict", graph["ctl.predict"])  # `from ..predict`: the package's module
        cycle = find_cycle(graph)
        self.assertIsNone(cycle, f"import cycle in the package: {' -> '.join(cycle or [])}")

    def test_each_module_imports_alone(self):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(PACKAGE_DIR), PYTHONDONTWRITEBYTECODE="1")
        for m in package_modules():
            if m == "__main__" or (m in ("torch_order", "locality") and TORCH_MISSING):
                continue  # __main__ runs the command line; torch_order and locality need torch
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
        torch_modules = {"torch_order", "locality", "torch_batch"}
        lazy = [(clairfs, n, m) for n, m in clairfs._HOME.items()]
        lazy += [(records, n, m) for n, m in records._PARSERS.items()]
        for where, name, module in lazy:
            if module in torch_modules and TORCH_MISSING:
                continue
            with self.subTest(module=where.__name__, name=name):
                home = importlib.import_module(f"{PACKAGE}.{module}")
                self.assertIs(getattr(where, name), getattr(home, name))
        self.assertEqual(set(clairfs._HOME),
                         {*clairfs._TORCH_NAMES, *clairfs._RECORDS_NAMES, *clairfs._HDF5_NAMES,
                          *clairfs._BATCH_NAMES, *clairfs._TORCH_BATCH_NAMES})


if __name__ == "__main__":
    unittest.main()
