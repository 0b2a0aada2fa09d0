#!/usr/bin/env python3
"""Fake agent: print a Claude-style rate-limit error and exit 1.

usage: agent_ratelimit.py [--retry-after SECONDS] [--json]
Plain text by default; --json prints it as Claude's `-p --output-format json`
result. With --retry-after the message carries "retry after Ns".
"""

import json
import sys

message = (
    'API Error: 429 {"type":"error","error":{"type":"rate_limit_error",'
    '"message":"Number of requests has exceeded your rate limit"}}'
)
if "--retry-after" in sys.argv:
    message += f" · retry after {sys.argv[sys.argv.index('--retry-after') + 1]}s"
if "--json" in sys.argv:
    print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "result": message}))
else:
    print(message, file=sys.stderr)
sys.exit(1)
