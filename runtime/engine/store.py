"""A keyed collection of rows with an ESP KEEP policy, its state kept as plain picklable data.

The :class:`Store` object holds only the policy; each instance's rows live in a state dict made by
:meth:`Store.initial_state`. Row order (for ``KEEP n ROWS``) is the order of the last insert or update:
an update makes its row the most recent one, as SAP's CCL FAQ puts it ("KEEP 10 ROWS will keep the
10 rows that have been added or updated most recently"). Every method returns the :class:`Change` records
it caused; deletes caused by the policy itself (evictions) are listed before the change that caused
them.
"""
from __future__ import annotations

import datetime as dt
from typing import Mapping, Optional

from ccl.plan.model import Aging, Keep
from runtime.engine.changes import Change

COUNT_KINDS = ("rows", "every_rows", "last")
_KEEP_ALL = Keep("all")


class Store:
    """Rows by key under the KEEP policy ``keep`` (the plan's :class:`Keep`, or ``None`` = keep
    all)."""

    def __init__(self, keep: Optional[Keep], aging: Optional[Aging] = None) -> None:
        """``aging``: the plan's AGES policy of the window, or None."""
        self.aging = aging
        keep = keep if keep is not None else _KEEP_ALL
        self.kind: str = keep.kind or "all"
        self.count: int = 1 if self.kind == "last" else int(keep.count or 0)
        # ROWS SLACK s: up to count + s - 1 rows; the row that would make count + s purges the
        # oldest s, leaving count (ESP: "no more than N + S rows ... purges S rows"; default 1)
        self.slack: int = max(int(keep.slack or 1), 1) if self.kind == "rows" else 1
        self.millis: int = int(keep.millis or 0)
        # PER applies to row-count policies; a sliding time window expires each row on its own.
        self.per: list[str] = list(keep.per) if self.kind in COUNT_KINDS else []
        # row keys by PER group serve the row-count policies only: other windows do not keep them
        # (a KEEP ALL window would hold every key twice)
        self.grouped: bool = self.kind in COUNT_KINDS

    def initial_state(self) -> dict:
        """An empty store: rows by key, row keys by PER group (insertion order, row-count
        policies only), last-change times. ``rows`` may also be a mapping over the bucket's state
        store (runtime/state/rows.py): the store only gets, sets and pops rows by key (and asks
        whether it holds any), except KEEP EVERY, which iterates them; ``times`` likewise (a
        mapping ordered by time with ``pop_due`` and ``earliest``, which :meth:`expire` and
        :meth:`next_deadline` use instead of walking it)."""
        return {"rows": {}, "groups": {}, "times": {}, "bucket": None}

    def get(self, state: dict, key: tuple) -> Optional[dict]:
        """The row stored under ``key``, or ``None``."""
        return state["rows"].get(key)

    def upsert(self, state: dict, key: tuple, row: Mapping[str, object], seq: int,
               now_ms: int) -> list[Change]:
        """Insert ``row`` under ``key``, or update the row there; evictions come first."""
        rows = state["rows"]
        new = row if type(row) is dict else dict(row)  # rows reach the store fresh: no copy
        if self.aging is not None:
            new = self._young(state, key, new, now_ms)
        old = rows.get(key)
        out: list[Change] = []
        if old is None:
            if self.kind == "every_time":
                out += self._start_bucket(state, seq, now_ms)
            out += self._make_room(state, self._group(new), seq)
            rows[key] = new
            if self.grouped:
                state["groups"].setdefault(self._group(new), {})[key] = None
            out.append(Change("i", key, None, new, seq))
        elif not self.grouped:
            rows[key] = new
            out.append(Change("u", key, old, new, seq))
        else:
            old_group, new_group = self._group(old), self._group(new)
            if old_group != new_group:
                self._ungroup(state, key, old_group)
                out += self._make_room(state, new_group, seq)
                state["groups"].setdefault(new_group, {})[key] = None
            else:  # the most recent row of its group now
                members = state["groups"][new_group]
                del members[key]
                members[key] = None
            rows[key] = new
            out.append(Change("u", key, old, new, seq))
        if self.kind == "time":
            state["times"].pop(key, None)   # re-inserted last: the dict stays in expiry order
            state["times"][key] = now_ms
        return out

    def delete(self, state: dict, key: tuple, seq: int) -> list[Change]:
        """Delete the row under ``key`` (nothing when there is none)."""
        old = state["rows"].pop(key, None)
        if old is None:
            return []
        self._ungroup(state, key, self._group(old))
        state["times"].pop(key, None)
        if "ages" in state:
            state["ages"].pop(key, None)
        return [Change("d", key, old, None, seq)]

    def expire(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Deletes of the rows a time policy evicts at ``now_ms``."""
        out: list[Change] = []
        if self.kind == "time":
            times = state["times"]
            due = getattr(times, "pop_due", None)
            if due is not None:  # in the bucket's state store: its time index has the due keys
                for key in due(now_ms - self.millis):
                    out += self.delete(state, key, seq)
            # Kept in order of last change: with a non-decreasing now_ms the due rows come first.
            while due is None and times:
                key, t = next(iter(times.items()))
                if t + self.millis > now_ms:
                    break
                out += self.delete(state, key, seq)
        elif self.kind == "every_time":
            out += self._start_bucket(state, seq, now_ms)
        if self.aging is not None:
            out += self._age(state, now_ms, seq)
        return out

    def next_deadline(self, state: dict) -> Optional[int]:
        """When :meth:`expire` next has work (ms since epoch), or ``None``."""
        if not state["rows"]:
            return None
        due = [due for due, _ in state.get("ages", {}).values()]
        if self.kind == "time":
            times = state["times"]
            earliest = getattr(times, "earliest", None)
            first = earliest() if earliest is not None else next(iter(times.values()), None)
            if first is not None:
                due.append(first + self.millis)
        elif self.kind == "every_time" and state["bucket"] is not None:
            due.append((state["bucket"] + 1) * self.millis)
        return min(due) if due else None

    # --- AGES EVERY ---------------------------------------------------------------------------

    def _young(self, state: dict, key: tuple, row: dict, now_ms: int) -> dict:
        """A row inserted or updated: its age is 0 again and its aging starts over, from now or
        from its start column."""
        aging = self.aging
        row = {**row, aging.column: 0}
        start = _millis(row.get(aging.start)) if aging.start else None
        if aging.times > 0:
            state.setdefault("ages", {})[key] = [(now_ms if start is None else start) + aging.millis, 0]
        return row

    def _age(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Updates of the rows whose aging time passed: their age column counted up (once per
        period that passed, up to ``times``)."""
        aging = self.aging
        out: list[Change] = []
        ages = state.get("ages", {})
        for key, (due, age) in list(ages.items()):
            if due > now_ms:
                continue
            periods = (now_ms - due) // aging.millis + 1
            age = min(age + periods, aging.times)
            old = state["rows"][key]
            new = state["rows"][key] = {**old, aging.column: age}
            out.append(Change("u", key, old, new, seq))
            if age >= aging.times:
                del ages[key]
            else:
                ages[key] = [due + periods * aging.millis, age]
        return out

    def _group(self, row: Mapping[str, object]) -> tuple:
        if not self.per:  # no PER: one group (called twice per change of every window)
            return ()
        return tuple([row.get(c) for c in self.per])

    def _ungroup(self, state: dict, key: tuple, group: tuple) -> None:
        members = state["groups"].get(group)
        if members is not None:
            members.pop(key, None)
            if not members:
                del state["groups"][group]

    def _make_room(self, state: dict, group: tuple, seq: int) -> list[Change]:
        """Evictions before a new row joins ``group`` under a row-count policy."""
        if self.kind not in COUNT_KINDS or self.count <= 0:
            return []
        members = state["groups"].get(group, {})
        if len(members) < self.count + self.slack - 1:
            return []
        if self.kind == "every_rows":
            victims = list(members)
        else:
            victims = [next(iter(members))] if len(members) == self.count else \
                list(members)[:len(members) - self.count + 1]
        out: list[Change] = []
        for key in victims:
            out += self.delete(state, key, seq)
        return out

    def _start_bucket(self, state: dict, seq: int, now_ms: int) -> list[Change]:
        """KEEP EVERY interval: leaving the current period deletes every row."""
        if self.millis <= 0:
            return []
        bucket = now_ms // self.millis
        out: list[Change] = []
        if state["bucket"] is not None and bucket > state["bucket"]:
            for key in list(state["rows"]):
                out += self.delete(state, key, seq)
        if not state["rows"] or state["bucket"] is None or bucket > state["bucket"]:
            state["bucket"] = bucket
        return out


def _millis(value: object) -> Optional[int]:
    """Milliseconds since the epoch of a date-time value (naive values are UTC), or None."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


_EPOCH = dt.datetime(1970, 1, 1)
