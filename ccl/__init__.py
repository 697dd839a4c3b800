"""CCL compiler: lexer, parser, AST, diagnostics (and, later, analysis, SPLASH, planner, codegen).

This package must import without Spark.
"""

__version__ = "0.1.0"
