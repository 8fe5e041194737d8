"""`python3 -m clairfs ...`: the same tool as clairfs-ctl (clairfs/ctl/)."""
import sys

from .ctl import main

sys.exit(main())
