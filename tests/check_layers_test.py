#!/usr/bin/env python3
"""tools/check_layers.py (run by every build) accepts the repository and refuses a planted
wrong-way include in a copy of a small tree: a cache/base file including a cache/plan header, an
fs file including a conf header, a cache file including a daemon header, a cluster file including
a header of the Slurm integration. Usage:
check_layers_test.py PATH/TO/check_layers.py"""
import os
import subprocess
import sys
import tempfile

checker = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(checker)))


def run(tree):
    return subprocess.run([sys.executable, checker, tree], capture_output=True, text=True)


def plant(tree, rel, text):
    path = os.path.join(tree, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


failures = []
got = run(root)
if got.returncode != 0:
    failures.append(f"the repository itself is refused:\n{got.stderr}")
PLANTED = (("cache/base/x.h", "cache/plan/plan.h"), ("fs/x.cc", "conf/config.h"),
           ("cache/tiers/x.cc", "daemon/command_line.h"), ("cluster/x.cc", "slurm/settings.h"))
for rel, include in PLANTED:
    with tempfile.TemporaryDirectory() as tree:
        plant(tree, "cache/plan/plan.h", "#pragma once\n")
        plant(tree, "cache/base/ok.h", '#pragma once\n#include "cache/base/ok2.h"\n')
        clean = run(tree)
        if clean.returncode != 0:
            failures.append(f"a clean tree is refused:\n{clean.stderr}")
        plant(tree, rel, f'#pragma once\n#include <vector>\n#include "{include}"\n')
        bad = run(tree)
        if bad.returncode == 0 or f"{rel}:3: includes {include}" not in bad.stderr:
            failures.append(f"{rel} including {include} was not refused: rc {bad.returncode}, "
                            f"{bad.stderr!r}")
for f in failures:
    print("FAIL:", f)
print(f"layers: {len(PLANTED) - len([f for f in failures if 'was not refused' in f])} of "
      f"{len(PLANTED)} planted wrong-way includes refused")
sys.exit(1 if failures else 0)
