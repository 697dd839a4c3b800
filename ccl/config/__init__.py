"""Configuration: the .ccr, runtime settings, parameters, adapter property sets and secrets."""
