"""A bucket's rows in the processor's input layout (one port), as BucketRun.process_table takes
them, for the tests of the columnar paths; and the plan text of a project whose element ``o`` keeps
its SPLASH variables in the state store, for the tests of that store."""
from __future__ import annotations

import json

import pyarrow as pa

from planned import plan_json, typed
from runtime.state.variables import uses_variable_store


def variable_store_plan(tmp_path, text: str) -> str:
    """The plan JSON text of the project ``text`` (written under ``tmp_path``), checked to keep
    the variables of its element ``o`` in the state store."""
    path = tmp_path / "f.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert uses_variable_store(typed(plan).element("o"))
    return json.dumps(plan)


def bucket_table(events: list, first_seq: int, values_type: pa.DataType) -> pa.Table:
    """``events`` ``(instance, opcode, why it came bad or None, values, shares the number of the
    one before)`` as a bucket's Arrow table, numbered from ``first_seq``; ``values_type`` is the
    struct type of the port's values."""
    seqs, subs = [], []
    for e in events:  # an event sharing the one before's number comes next in its transaction
        shared = e[4] and bool(seqs)
        seqs.append(seqs[-1] if shared else first_seq + len(seqs))
        subs.append(subs[-1] + 1 if shared else 0)
    n = len(events)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()),
        "__seq": pa.array(seqs, pa.int64()),
        "__sub": pa.array(subs, pa.int64()),
        "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array([e[1] for e in events], pa.string()),
        "__inst": pa.array([e[0] for e in events], pa.int32()),
        "__why": pa.array([e[2] for e in events], pa.string()),
        "__raw": pa.array(["x,y" if e[2] else None for e in events], pa.string()),
        "__p0": pa.array([e[3] for e in events], values_type),
        "__bucket": pa.array([0] * n, pa.int32())})
