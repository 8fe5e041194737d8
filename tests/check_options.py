#!/usr/bin/env python3
"""The include rule of the one source of defaults (docs/configuration.md, "Defaults").

A component's option header (*_options.h) includes only standard headers, so that conf/ can
parse into it without depending on the component's code; conf/ includes, of the other
folders, only cache/base/status.h and such option headers. Exit status 0 when both hold, else 1
with each offending include listed.
"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
CONF_MAY_INCLUDE = {"cache/base/status.h"}


def includes(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def main():
    failures = []
    option_headers = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for name in files:
            if name.endswith("_options.h"):
                option_headers.append(os.path.relpath(os.path.join(root, name), REPO))
    for header in sorted(option_headers):
        for kind, target in includes(os.path.join(REPO, header)):
            if kind == '"':
                failures.append(f"{header}: includes \"{target}\" (an option header includes "
                                "only standard headers)")
    conf = os.path.join(REPO, "conf")
    for name in sorted(os.listdir(conf)):
        if not name.endswith((".h", ".cc")):
            continue
        for kind, target in includes(os.path.join(conf, name)):
            if kind != '"' or target.startswith("conf/") or target in CONF_MAY_INCLUDE:
                continue
            if target.endswith("_options.h"):
                continue
            failures.append(f"conf/{name}: includes \"{target}\" (conf/ includes only "
                            "cache/base/status.h and the components' *_options.h)")
    if not option_headers:
        failures.append("no *_options.h found")
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"ok: {len(option_headers)} option headers, conf/ includes only them and "
              "cache/base/status.h")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
