"""Per-instance state kept off the Python heap: one RocksDB store per bucket (issue 27).

- :mod:`runtime.state.keys`: the order-preserving encoding of state keys (the instance number,
  then the element's key values), so that one instance's rows are one byte prefix.
- :mod:`runtime.state.store`: :class:`BucketStore`, a bucket's key-value store by namespace (the
  kinds of state: window rows, aggregate groups, Flex variables, cache buckets...), with a time
  index for expiry that does not scan, a version per committed batch and undo records that bring
  a replayed batch back to exactly the state before it; :func:`create`, :func:`rebucket`
  (``rebucket_keys``: by a route of each value) and :func:`read_layout` for the run directory's
  set of buckets.

- :mod:`runtime.state.rows`: the rows of the engine's windows, a time KEEP's times (in the time
  index) and the groups of its aggregates over a bucket store, for the elements run by
  runtime/arrow_state.py;
- :mod:`runtime.state.variables`: the dictionaries (scalar keys; values of scalars, records,
  vectors or dictionaries) and event caches of a Flex's or a derived element's DECLARE variables, entry by
  entry and bucket by bucket (other variables are still pickled per bucket, see docs/runtime.md,
  "The state store").
"""
from .keys import decode_key, encode_key
from .store import (BucketStore, Layout, StateError, StoreStats, create, read_layout, rebucket)

__all__ = ["BucketStore", "Layout", "StateError", "StoreStats", "create", "read_layout",
           "rebucket", "encode_key", "decode_key"]
