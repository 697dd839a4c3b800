"""CCL column types as Spark SQL types (the runtime's storage form of each CCL type)."""
from __future__ import annotations

import re
from typing import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.plan.model import Element
from runtime.engine.parts import column_pairs

_SIMPLE = {
    "integer": T.IntegerType(), "long": T.LongType(), "float": T.DoubleType(),
    "string": T.StringType(), "boolean": T.BooleanType(), "binary": T.BinaryType(),
    # ESP's date has second precision, timestamp millisecond, bigdatetime microsecond: all fit
    # Spark's microsecond timestamp; values are truncated to their precision on input.
    "date": T.TimestampType(), "timestamp": T.TimestampType(), "bigdatetime": T.TimestampType(),
    "interval": T.LongType(),  # microseconds
}
_DECIMAL = re.compile(r"^(money|decimal)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def spark_type(ccl_type: str) -> T.DataType:
    """The Spark type of a CCL type text (``money(2)`` is ``decimal(18,2)``, ``money`` ``money(4)``)."""
    text = ccl_type.strip().lower()
    if text in _SIMPLE:
        return _SIMPLE[text]
    m = _DECIMAL.match(text)
    if m:
        if m.group(1) == "money":
            return T.DecimalType(18, int(m.group(2)) if m.group(2) else 4)
        precision = int(m.group(2)) if m.group(2) else 10
        return T.DecimalType(precision, int(m.group(3)) if m.group(3) else 0)
    return T.StringType()  # unknown types are carried as text


def struct(columns: Sequence[Sequence[str]]) -> T.StructType:
    """The Spark schema of a plan's ``columns`` list (``[[name, type], ...]``)."""
    return T.StructType([T.StructField(name, spark_type(t), True) for name, t in columns])


def columns_of(element: Element) -> list[tuple[str, str]]:
    """An element's ``(name, CCL type)`` pairs, as :func:`struct` and the writers take them."""
    return column_pairs(element.columns)


def column(name: str) -> Column:
    """The column ``name`` (a CCL name may hold characters Spark would parse: quoted)."""
    return F.col("`" + name.replace("`", "``") + "`")
