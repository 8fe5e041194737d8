"""python/ as a pip-installable package, offline: installed into fresh venvs in a temp dir
the ways docs/pytorch.md ("Installing") gives, then imported by the venv's own interpreter.

  - a venv with --system-site-packages (Debian's torch visible), installed from the source
    with `pip install --no-index --no-build-isolation` (Debian's setuptools and wheel build it);
  - a wheel built once with `pip wheel`, installed into an isolated venv (no setuptools, no
    system packages): the route for another Python 3, and proof the package needs nothing
    outside the standard library to import.

With mypy (Debian: mypy), a user's script is type-checked against the package installed in
the isolated venv: py.typed makes mypy read its annotations.

The source is copied into the temp dir first, so setuptools' build/ and clairfs.egg-info land
there and not in the source tree. Needs /usr/bin/python3 with venv, ensurepip, setuptools and
wheel (Debian: python3-venv python3-pip python3-setuptools python3-wheel); skipped otherwise.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(REPO, "python")

# Run by the venv's interpreter, from the temp dir: where clairfs came from and what it says.
PROBE = r"""
import importlib.metadata, json, os, sys
import clairfs, clairfs.compact, clairfs.control, clairfs.records, clairfs.tar, clairfs.tfrecord
import clairfs.lmdb_pages, clairfs.fixed, clairfs.npy, clairfs.hdf5, clairfs.predict
import clairfs.ctl  # and the subcommands' modules it imports
here = os.path.dirname(clairfs.__file__)
print(json.dumps({"file": os.path.realpath(clairfs.__file__), "prefix": os.path.realpath(sys.prefix),
                  "version": clairfs.__version__,
                  "metadata": importlib.metadata.version("clairfs"),
                  "typed": os.path.isfile(os.path.join(here, "py.typed")),
                  "torch_loaded": "torch" in sys.modules,
                  "prometheus_loaded": "prometheus_client" in sys.modules,
                  "h5py_loaded": "h5py" in sys.modules,
                  "has_register_paths": callable(clairfs.register_paths)}))
"""


def _missing():
    """Why this Python cannot build and install the package offline, or None."""
    for module in ("venv", "ensurepip", "setuptools", "wheel"):
        probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
        if probe.returncode != 0:
            return (f"{sys.executable} cannot import {module} (Debian: apt-get install "
                    f"python3-venv python3-pip python3-setuptools python3-wheel)")
    return None


def _version_in(path, pattern):
    with open(path) as f:
        found = re.search(pattern, f.read(), re.MULTILINE)
    return found.group(1) if found else None


def _clean_env():
    """The environment for pip and the venvs: no PYTHONPATH (the repo must not be importable),
    no user site, no index, no prompts."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
                        "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    return env


MISSING = _missing()
MYPY_MISSING = None if subprocess.run([sys.executable, "-m", "mypy", "--version"],
                                      capture_output=True).returncode == 0 \
    else f"{sys.executable} -m mypy does not run (Debian: apt-get install mypy)"

# A user's script: line 6 assigns an int to a str, the one error mypy must find (the lines
# after it use the HDF5 helpers, whose annotations must hold too).
USER_SCRIPT = """import clairfs
entries: int = clairfs.register_paths("/m", [["a/1"]], stream="s")
name: str = clairfs.default_stream_name()
version: str = clairfs.__version__
line: bytes = clairfs.manifest_line("a/1", 0, 10)
wrong: str = clairfs.register_paths("/m", [["a/1"]])
layout: clairfs.HDF5Layout = clairfs.hdf5_layout("/m/f.h5", "x")
ranges: list[tuple[int, int]] = layout.row_ranges(3) + clairfs.hdf5_metadata_ranges("/m/f.h5", "x")
hdf5_entries: int = clairfs.register_hdf5("/m", "f.h5", "x", [[0, 1], range(5)], stream="s")
"""


@unittest.skipIf(MISSING, MISSING)
class PackagingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="clairfs-py-packaging-")
        try:
            cls._install()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _run(cls, argv):
        done = subprocess.run(argv, cwd=cls.tmp, env=_clean_env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    @classmethod
    def _install(cls):
        src = os.path.join(cls.tmp, "src")
        shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", "*.pyc", "examples"))
        cls.system_venv = os.path.join(cls.tmp, "system-venv")
        cls._run([sys.executable, "-m", "venv", "--system-site-packages", cls.system_venv])
        cls._run([os.path.join(cls.system_venv, "bin", "pip"), "install", "--no-index",
                  "--no-build-isolation", src])
        cls.system_probe = json.loads(
            cls._run([os.path.join(cls.system_venv, "bin", "python"), "-c", PROBE]))

        wheels = os.path.join(cls.tmp, "wheels")
        cls._run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                  "--no-build-isolation", "--wheel-dir", wheels, src])
        cls.wheels = glob.glob(os.path.join(wheels, "*.whl"))
        cls.isolated_venv = os.path.join(cls.tmp, "isolated-venv")
        cls._run([sys.executable, "-m", "venv", cls.isolated_venv])
        cls._run([os.path.join(cls.isolated_venv, "bin", "pip"), "install", "--no-index",
                  *cls.wheels])
        cls.isolated_probe = json.loads(
            cls._run([os.path.join(cls.isolated_venv, "bin", "python"), "-c", PROBE]))

    def test_version_is_the_daemons_everywhere(self):
        source = _version_in(os.path.join(SOURCE, "clairfs", "_version.py"),
                             r'^__version__ = "([^"]+)"$')
        daemon = _version_in(os.path.join(REPO, "meson.build"), r"^\s*version : '([^']+)',")
        self.assertIsNotNone(source)
        self.assertEqual(source, daemon, "clairfs/_version.py and meson.build's project version")
        for probe in (self.system_probe, self.isolated_probe):
            self.assertEqual(probe["version"], source)
            self.assertEqual(probe["metadata"], source)  # what pip recorded, from pyproject.toml
        self.assertEqual([os.path.basename(w) for w in self.wheels],
                         [f"clairfs-{source}-py3-none-any.whl"])

    def test_imported_from_the_venv(self):
        for venv, probe in ((self.system_venv, self.system_probe),
                            (self.isolated_venv, self.isolated_probe)):
            site = glob.glob(os.path.join(os.path.realpath(venv), "lib", "python3*",
                                          "site-packages"))
            self.assertEqual(len(site), 1, site)
            self.assertEqual(probe["prefix"], os.path.realpath(venv))
            self.assertEqual(probe["file"], os.path.join(site[0], "clairfs", "__init__.py"))

    def test_py_typed_is_installed(self):
        self.assertTrue(self.system_probe["typed"])
        self.assertTrue(self.isolated_probe["typed"])

    @unittest.skipIf(MYPY_MISSING, MYPY_MISSING)
    def test_mypy_reads_the_installed_annotations(self):
        script = os.path.join(self.tmp, "user_script.py")
        with open(script, "w") as f:
            f.write(USER_SCRIPT)
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--python-executable",
             os.path.join(self.isolated_venv, "bin", "python"), "--no-incremental",
             "--cache-dir", os.devnull, "--no-error-summary", "user_script.py"],
            cwd=self.tmp, env=_clean_env(), capture_output=True, text=True)
        errors = [line for line in done.stdout.splitlines() if ": error:" in line]
        self.assertEqual(len(errors), 1, done.stdout + done.stderr)
        self.assertIn("user_script.py:6: error: Incompatible types in assignment "
                      "(expression has type \"int\", variable has type \"str\")", errors[0])

    def test_standard_library_only(self):
        # The isolated venv has pip and setuptools and nothing else: every module imported.
        self.assertTrue(self.isolated_probe["has_register_paths"])
        self.assertFalse(self.isolated_probe["torch_loaded"])
        self.assertFalse(self.system_probe["torch_loaded"], "import clairfs imported torch")
        self.assertFalse(self.system_probe["prometheus_loaded"],
                         "importing clairfs-ctl's modules imported prometheus_client")
        self.assertFalse(self.system_probe["h5py_loaded"], "importing clairfs.hdf5 imported h5py")


class InstallListTest(unittest.TestCase):
    """python/meson.build installs every file of the package (its modules and py.typed), each
    into the directory of the package it belongs to, and pyproject.toml names every package (a
    file missing there imports from the source tree in these tests and fails only where the
    package is installed)."""

    def present(self):
        """The package's files, relative to python/ ("clairfs/ctl/cache.py", ...)."""
        found = set()
        for d, dirs, names in os.walk(os.path.join(SOURCE, "clairfs")):
            dirs[:] = [n for n in dirs if n != "__pycache__"]
            found.update(os.path.relpath(os.path.join(d, n), SOURCE) for n in names
                         if n.endswith(".py") or n == "py.typed")
        return found

    def test_meson_installs_every_file_in_its_package(self):
        with open(os.path.join(SOURCE, "meson.build")) as f:
            text = f.read()
        listed = set()
        for files, into in re.findall(r"install_data\(((?:\s*'clairfs/[^']+',)+)\s*"
                                      r"install_dir : python_dir((?: / '[^']+')+)\)", text):
            into = "/".join(re.findall(r"'([^']+)'", into))
            for path in re.findall(r"'(clairfs/[^']+)'", files):
                self.assertEqual(os.path.dirname(path), into, f"{path} is installed into {into}")
                listed.add(path)
        self.assertEqual(listed, self.present())

    def test_pyproject_names_every_package(self):
        with open(os.path.join(SOURCE, "pyproject.toml")) as f:
            named = re.search(r"^packages = \[(.*)\]$", f.read(), re.MULTILINE).group(1)
        packages = {os.path.dirname(p).replace("/", ".") for p in self.present()
                    if os.path.basename(p) == "__init__.py"}
        self.assertEqual(set(re.findall(r'"([^"]+)"', named)), packages)


if __name__ == "__main__":
    unittest.main()
