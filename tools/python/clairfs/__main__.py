"""`python3 -m clairfs ...`: the same tool as clairfs-ctl (clairfs/cli.py)."""
import sys

from .cli import main

sys.exit(main())
