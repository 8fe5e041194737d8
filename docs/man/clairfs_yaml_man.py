#!/usr/bin/env python3
"""Writes clairfs.yaml(5): the syntax of the configuration around conf/clairfs.yaml itself
(every key, its default and its comment), so that the page and the file cannot disagree.

Usage: clairfs_yaml_man.py CONF_YAML OUT_MAN5 VERSION
"""
import sys

HEAD = r""".TH CLAIRFS.YAML 5 "2026-11-25" "clairfs @VERSION@" "File Formats"
.SH NAME
clairfs.yaml \- configuration of the clairfs daemon
.SH SYNOPSIS
.I /etc/clairfs/clairfs.yaml
.br
.B clairfs \-c
.I FILE
\&...
.br
.B clairfs \-o
.IB section . key = value
\&...
.SH DESCRIPTION
YAML. Every key is optional; an unknown key, a value of the wrong type, a bad unit or a value
out of range stops the start with the key named and exit status 78.
The daemon reads the file given by
.B \-c
or
.BR "\-o config=" ;
without either,
.I /etc/clairfs/clairfs.yaml
when it exists; otherwise the built-in defaults apply.
.PP
Sizes are a number of bytes or a number with a unit: KiB, MiB, GiB, TiB (also K, M, G, T) or
kB, MB, GB, TB; 1.5GiB works.
Durations are seconds.
.PP
Any key can also be given on the command line or in an fstab line as
.BR \-o \ \fIsection\fB.\fIkey\fB=\fIvalue\fR,
applied over the file in the order given: a list element by its index
.RB ( cache.tiers.1.capacity=200GiB ;
an index into tiers the file does not list reaches the built-in RAM and SSD tiers), a whole
value as YAML flow text with its commas escaped
.RB ( "cache.tiers=[{kind: ram\e, capacity: 8GiB}]" ).
.SH DEFAULTS
Every key with its built-in value and what it means:
.PP
.nf
"""

TAIL = r""".fi
.SH SEE ALSO
.BR clairfs (1)
"""


def roff_literal(line):
    # Inside .nf: backslashes escaped; a line starting with . or ' must not read as a request.
    line = line.replace("\\", "\\e")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def main():
    src, out, version = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(src, encoding="utf-8") as f:
        body = [roff_literal(l.rstrip("\n")) for l in f]
    with open(out, "w", encoding="utf-8") as f:
        f.write(HEAD.replace("@VERSION@", version))
        f.write("\n".join(body) + "\n")
        f.write(TAIL)


if __name__ == "__main__":
    main()
