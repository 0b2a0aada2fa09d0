"""`python -m forge.hooks NAME ...`: what the hook scripts exec (imports little)."""

import sys

from forge.hooks.runtime import main

raise SystemExit(main(sys.argv[1:]))
