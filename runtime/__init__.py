"""Everything that touches Spark: executes the compiled plan (``ccl.plan.model``, read through
``ccl.plan.codec``, whose expressions are ``ccl.syntax.nodes`` trees) with the SPLASH interpreter
(``ccl.splash``) and the compiler's lowerings (``ccl.plan.lowering``, built with its Spark
backends); it imports nothing else of ``ccl`` (tests/test_layers.py)."""
