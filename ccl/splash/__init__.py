"""SPLASH at run time: the interpreter (the reference semantics of SPLASH code) and its values.

- :mod:`.values`: errors and the Python form of each CCL type;
- :mod:`.convert`: casts, assignment widening, text formatting and parsing;
- :mod:`.operators`: arithmetic, comparison, logic, LIKE and IN;
- :mod:`.builtins`: the built-in functions (docs/functions.md);
- :mod:`.machine`: the state of a running call (scopes, budget, depth) and container access;
- :mod:`.expressions`, :mod:`.compiler`: syntax trees to Python closures;
- :mod:`.interpreter`: :class:`Interpreter`, :func:`declare_globals`, :class:`PartitionFunction`.

Where an operator or built-in also exists in Spark SQL, its semantics are Spark's with
``spark.sql.ansi.enabled=false``, so that the Spark compiler of partition functions agrees with
this interpreter row for row.
"""
from .builtins import BUILTINS, Builtin
from .interpreter import (DEFAULT_BUDGET, DEFAULT_MAX_DEPTH, Declarations, Interpreter, Outcome,
                          PartitionFunction, declare_globals)
from .values import (BudgetExhausted, Dec, Dictionary, Interval, Long, Record, SplashError, Vector,
                     as_type, make_dec)

__all__ = [
    "BUILTINS", "Builtin", "BudgetExhausted", "DEFAULT_BUDGET", "DEFAULT_MAX_DEPTH", "Dec",
    "Declarations", "Dictionary", "Interpreter", "Interval", "Long", "Outcome", "PartitionFunction",
    "Record", "SplashError", "Vector", "as_type", "declare_globals", "make_dec",
]
