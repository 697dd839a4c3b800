"""Evaluating one SPLASH expression against a test row (the built-in tests share this)."""
from __future__ import annotations

import math
from typing import Callable, Mapping

from ccl.syntax.parser import parse_text
from ccl.splash import Interpreter


def evaluator(interp: Interpreter, row: Mapping[str, object]) -> Callable[..., object]:
    """``ev(code, **changes)``: the value of the SPLASH expression ``code`` in ``interp``, where
    ``r.x`` reads ``row`` updated with ``changes``."""
    def ev(code: str, **changes: object) -> object:
        project, diags = parse_text(f"CREATE OUTPUT STREAM o PARTITION BY r {{ return {code}; }} "
                                    "PARTITIONS 2 AS SELECT * FROM r;")
        assert not diags, diags
        expr = project.statements[0].partition.specs[0].body.stmts[0].value
        return interp.evaluate(expr, {"r": {**row, **changes}})
    return ev


def same(a: object, b: object) -> bool:
    """Equal values of the same Python type (NaN equals NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b
