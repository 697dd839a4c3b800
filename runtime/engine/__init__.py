"""Per-instance processing of one element, in plain Python (no Spark): see docs/runtime.md."""
