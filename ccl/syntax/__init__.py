"""The front end: preprocessor, lexer, parser, the syntax tree (nodes), the printer, and loading a
project's files."""
