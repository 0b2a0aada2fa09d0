#!/usr/bin/env python3
"""Fake agent: print a message and fail.

usage: agent_fail.py [MESSAGE] [--code N]   (default exit code 1)
"""

import sys

args = sys.argv[1:]
code = 1
if "--code" in args:
    i = args.index("--code")
    code = int(args[i + 1])
    del args[i : i + 2]
print(args[0] if args else "fake agent failed: could not do the task", flush=True)
sys.exit(code)
