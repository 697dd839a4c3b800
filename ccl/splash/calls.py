"""What every SPLASH built-in is made of: the call context it may ask things of, its entry in the
table (:class:`Builtin`), and the argument checks the built-in modules share."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from .operators import to_float
from .values import MAX_STRING, SplashError, a_kind, is_integral, is_number, wrap32


class CallContext(Protocol):
    """What a built-in may ask of the running interpreter."""

    def now(self) -> dt.datetime:
        """The current time (naive UTC), the same for the whole call."""

    def print(self, text: str) -> None:
        """Send a line to the program's output."""

    def next_in_sequence(self) -> int:
        """The next number of the program's sequence (``nextval()``)."""

    def current_row_id(self) -> Optional[int]:
        """The sequence number of the input row being processed (``getrowid()``), if any."""


@dataclass(frozen=True)
class Builtin:
    """A built-in function: arity, implementation, null handling and its Spark counterpart."""

    name: str
    min_args: int
    max_args: Optional[int]
    fn: Callable[..., object]
    strict: bool = True
    spark: Optional[str] = None


def need_str(name: str, i: int, v: object) -> str:
    if not isinstance(v, str):
        raise SplashError(f"{name}() argument {i} must be a string, not {a_kind(v)}")
    return v


def need_int(name: str, i: int, v: object) -> int:
    """An integer argument (a long is cut to 32 bits, as Spark's implicit cast does)."""
    if not is_integral(v):
        raise SplashError(f"{name}() argument {i} must be an integer, not {a_kind(v)}")
    return wrap32(v)  # type: ignore[arg-type]


def need_number(name: str, v: object) -> None:
    if not is_number(v):
        raise SplashError(f"{name}() needs a number, not {a_kind(v)}")


def need_time(name: str, v: object) -> dt.datetime:
    if not isinstance(v, dt.datetime):
        raise SplashError(f"{name}() needs a date-time, not {a_kind(v)}")
    return v


def check_length(s: str) -> str:
    if len(s) > MAX_STRING:
        raise SplashError(f"string longer than {MAX_STRING} characters")
    return s


def logarithm(name: str, f: Callable[[float], float]) -> Callable[..., Optional[float]]:
    def run(ctx: CallContext, v: object) -> Optional[float]:
        need_number(name, v)
        x = to_float(v)
        if x <= 0:
            return None
        return x if math.isnan(x) or math.isinf(x) else f(x)
    return run
