"""Everything that touches Spark: consumes the compiled plan, never the AST."""
