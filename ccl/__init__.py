"""The CCL compiler: front end (syntax), configuration, analysis, SPLASH, planning (plan),
operations (ops) and the command line (cli).

This package must import without Spark.
"""

__version__ = "0.1.0"

import sys as _sys

# The analyzer, the SPLASH compiler and compiled expressions recurse once or a few times per level
# of an expression or statement: a flat `a + b + ...` of 600 terms, or an else-if chain of 200
# branches (generated mapping code has such), needs more than Python's default 1,000 frames.
# Python 3.11 calls Python functions without growing the C stack, so a higher limit is safe.
RECURSION_LIMIT = 20_000
if _sys.getrecursionlimit() < RECURSION_LIMIT:
    _sys.setrecursionlimit(RECURSION_LIMIT)
