"""The driver's pool of bucket workers (runtime/bucket_pool.py) started ahead of a large batch."""
from __future__ import annotations

from concurrent.futures import wait

from runtime import bucket_pool


def test_warm_starts_the_workers_of_a_new_pool():
    bucket_pool._shut_down()  # noqa: SLF001 - a pool another test of this process made
    bucket_pool._POOL = None  # noqa: SLF001
    try:
        tasks = bucket_pool.warm(2)
        assert len(tasks) == 2
        done, _ = wait(tasks, timeout=120)
        assert len(done) == 2 and all(t.exception() is None for t in done)
        pool = bucket_pool._pool(2)  # noqa: SLF001 - the pool warm made, not a new one
        assert len(pool._processes) == 2  # noqa: SLF001
    finally:
        bucket_pool._shut_down()  # noqa: SLF001
        bucket_pool._POOL = None  # noqa: SLF001


def test_warm_of_one_worker_makes_no_pool():
    before = bucket_pool._POOL  # noqa: SLF001
    assert bucket_pool.warm(1) == []
    assert bucket_pool._POOL is before  # noqa: SLF001
