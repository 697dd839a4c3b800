"""Everything that touches Spark: executes the compiled plan (``ccl.plan.model``, whose expressions
are ``ccl.syntax.nodes`` trees) with the SPLASH interpreter (``ccl.splash``); it imports nothing
else of ``ccl`` (tests/test_layers.py)."""
