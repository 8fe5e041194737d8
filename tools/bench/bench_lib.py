"""What the Python benchmark scripts share (lib.sh is the shell scripts' counterpart): the
default binaries of this checkout, the options several scripts take, each defined once, and
wait_for. Standard library only; a script beside this file imports it by name (its directory
is on sys.path when it runs).
"""
import os
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLAIRFS_BIN = os.path.join(REPO, "build", "daemon", "clairfs")  # this checkout's build/
BENCH_BIN = os.path.join(REPO, "build", "tools", "bench", "clairfs-bench")


def add_dataset_options(ap, files=None, mean_kb=None, sigma=None, seed=None):
    """Adds the generated dataset's options (tools/make_dataset.py's) to the argparse parser
    `ap`: --files N, --mean-kb KB, --sigma S, --seed N, each with the default given (None: the
    script does not take that option)."""
    if files is not None:
        ap.add_argument("--files", type=int, default=files)
    if mean_kb is not None:
        ap.add_argument("--mean-kb", type=float, default=mean_kb)
    if sigma is not None:
        ap.add_argument("--sigma", type=float, default=sigma)
    if seed is not None:
        ap.add_argument("--seed", type=int, default=seed)


def add_loader_options(ap):
    """Adds the training loop's options, with the defaults every benchmark uses (the shell
    scripts' too): --epochs 3, --workers 4, --prefetch-factor 2, --batch-size 16,
    --compute-ms 1.5 (per sample)."""
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--compute-ms", type=float, default=1.5)


def add_tmp_option(ap, default="/var/tmp"):
    """Adds --tmp DIR: where the script's temporary directory is made."""
    ap.add_argument("--tmp", default=default)


def wait_for(pred, timeout, what, interval=0.05):
    """Polls pred() every `interval` seconds until it is true; after `timeout` seconds ends the
    script (SystemExit: "timed out after Ns waiting for WHAT"), its cleanups running."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
