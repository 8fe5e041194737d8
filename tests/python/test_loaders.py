"""clairfs.open_file, read_file and pil_loader on a real mount: the same bytes and pixels as
open(path, "rb") and torchvision's default loader, and no isatty probe, so no request to the
daemon per warm file. The probe is seen with strace: Python's default open() of a file on the
mount makes an ioctl TCGETS on its descriptor (the test checks that it does, so that its
absence for the package's functions means something); theirs make none. The strace checks are
skipped without strace (tools/setup.sh --with-tests installs it); the PIL check without PIL."""
import os
import re
import shutil
import subprocess
import sys
import unittest

import harness

import clairfs

try:
    from PIL import Image
    PIL_MISSING = None
except ImportError as e:  # pragma: no cover
    PIL_MISSING = f"PIL not importable: {e}"

PYTHON = "/usr/bin/python3"
PACKAGE = os.path.join(harness.REPO, "python")


def ioctls_on_file(path, call, logdir):
    """The ioctl requests a fresh Python process makes on the descriptor of path while call
    (an expression of the package, with p bound to path) runs: the names strace prints."""
    log = os.path.join(logdir, "strace.log")
    code = (f"import sys; sys.path.insert(0, {PACKAGE!r}); import clairfs; p = {path!r}; "
            f"{call}")
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,ioctl,close", "-o", log,
                    PYTHON, "-c", code], check=True, timeout=120)
    fds, names = set(), []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r'openat\([^,]+, "([^"]+)".*\)\s+=\s+(\d+)', line)
            if m and m.group(1) == path:
                fds.add(m.group(2))
                continue
            m = re.search(r"ioctl\((\d+), (\w+)", line)
            if m and m.group(1) in fds:
                names.append(m.group(2))
            m = re.search(r"close\((\d+)\)", line)
            if m:
                fds.discard(m.group(1))
    os.unlink(log)
    return names


class LoadersTest(harness.ClairfsCase):
    def setUp(self):
        self.data = self.tmpdir("ld")
        self.files = {}
        for i in range(5):
            body = os.urandom(1000 + 37000 * i)
            name = os.path.join(self.data, f"f{i}.bin")
            with open(name, "wb") as f:
                f.write(body)
            self.files[f"f{i}.bin"] = body
        self.image = os.path.join(self.data, "img.png")
        if not PIL_MISSING:
            Image.new("RGBA", (31, 17), (10, 200, 30, 128)).save(self.image)
        self.mount(self.data)  # over the dataset itself, as a job would

    def test_the_same_bytes_as_open(self):
        for name, body in self.files.items():
            path = os.path.join(self.data, name)
            self.assertEqual(clairfs.read_file(path), body, name)
            with clairfs.open_file(path) as f:
                self.assertEqual(f.read(), body, name)
            with clairfs.open_file(path) as f:  # buffered reads in pieces, as PIL makes them
                pieces = []
                while chunk := f.read(4096):
                    pieces.append(chunk)
                self.assertEqual(b"".join(pieces), body, name)
        with self.assertRaises(FileNotFoundError):
            clairfs.read_file(os.path.join(self.data, "absent"))

    @unittest.skipIf(PIL_MISSING, PIL_MISSING)
    def test_pil_loader_gives_the_default_loaders_pixels(self):
        path = self.image
        with open(path, "rb") as f:
            want = Image.open(f).convert("RGB")
        got = clairfs.pil_loader(path)
        self.assertEqual(got.mode, "RGB")
        self.assertEqual((got.size, got.tobytes()), (want.size, want.tobytes()))

    @unittest.skipIf(shutil.which("strace") is None, "strace not installed")
    def test_no_isatty_probe(self):
        path = os.path.join(self.data, "f1.bin")
        logs = self.tmpdir("st")
        default = ioctls_on_file(path, "open(p, 'rb').read()", logs)
        self.assertIn("TCGETS", default, "Python's default open() probes: the check sees it")
        for call in ("clairfs.read_file(p)", "clairfs.open_file(p).read()"):
            self.assertEqual(ioctls_on_file(path, call, logs), [], call)
        if not PIL_MISSING:
            self.assertEqual(ioctls_on_file(self.image, "clairfs.pil_loader(p)", logs), [])


if __name__ == "__main__":
    unittest.main()
