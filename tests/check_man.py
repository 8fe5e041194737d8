#!/usr/bin/env python3
"""Checks the manual pages: each renders with man(1) without a warning; clairfs(1) documents
every option `clairfs --help` lists and every exit status of daemon/command_line.h;
clairfs.yaml(5) holds every key of conf/clairfs.yaml.

Usage: check_man.py CLAIRFS_1 CLAIRFS_YAML_5 CLAIRFS_BIN. Exit 0 when all hold, 1 otherwise,
77 when man(1) is not installed.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def render(path):
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path], capture_output=True,
                       text=True, env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING=""),
                       timeout=60)
    if r.returncode != 0 or r.stderr.strip():
        raise AssertionError(f"{path}: man exited {r.returncode}: {r.stderr.strip()}")
    # Plain text: overstrikes (bold, underline) removed.
    return re.sub(r".\x08", "", r.stdout)


def main():
    man1, man5, binary = sys.argv[1:4]
    if shutil.which("man") is None:
        print("man: man(1) not installed; skipped")
        return 77
    failures = []
    page1 = render(man1)
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    for flag in sorted(set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", help_text))):
        if flag not in page1:
            failures.append(f"clairfs(1) does not mention {flag} (from --help)")
    with open(os.path.join(REPO, "daemon", "command_line.h")) as f:
        codes = re.findall(r"^\s*k\w+ = (\d+),", f.read(), re.M)
    if len(codes) < 5:
        failures.append(f"found only {codes} in daemon/command_line.h")
    status = page1.split("EXIT STATUS", 1)[-1]
    for code in codes:
        if not re.search(rf"^\s+{code}\s+\S", status, re.M):
            failures.append(f"clairfs(1) EXIT STATUS does not list {code}")
    page5 = render(man5)
    with open(os.path.join(REPO, "conf", "clairfs.yaml")) as f:
        keys = re.findall(r"^\s*(?:- )?([a-z_]+):", f.read(), re.M)
    for key in keys:
        if key + ":" not in page5:
            failures.append(f"clairfs.yaml(5) does not hold the key {key}")
    for f in failures:
        print("FAIL:", f)
    print(f"man: {len(keys)} keys, {len(codes)} exit codes checked; "
          f"{'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
