"""The package's version: the one place it is written.

pyproject.toml reads it (setuptools dynamic version) and clairfs.__version__ is it. It follows
the daemon's version, the project() version in meson.build; tests/python/test_packaging.py
fails when they differ.
"""
__version__ = "0.1.0"
