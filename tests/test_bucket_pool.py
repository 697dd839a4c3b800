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


def test_map_if_running_uses_no_pool_that_is_not_running():
    bucket_pool._shut_down()  # noqa: SLF001
    bucket_pool._POOL = None  # noqa: SLF001
    assert bucket_pool.map_if_running(pow, [2, 3], [5, 2]) is None
    assert bucket_pool._POOL is None  # noqa: SLF001 - none was made for it


def test_map_if_running_gives_the_results_in_order_from_a_running_pool():
    bucket_pool._shut_down()  # noqa: SLF001
    bucket_pool._POOL = None  # noqa: SLF001
    try:
        wait(bucket_pool.warm(2), timeout=120)
        assert bucket_pool.map_if_running(pow, [2, 3, 10, 7], [5, 2, 3, 0]) == [32, 9, 1000, 1]
    finally:
        bucket_pool._shut_down()  # noqa: SLF001
        bucket_pool._POOL = None  # noqa: SLF001


class _Part:
    def __init__(self, rows: int) -> None:
        self.num_rows = rows


def test_the_largest_buckets_go_first_and_their_outputs_come_back_in_bucket_order(monkeypatch):
    handed = []

    def mapped(pool, fn, runners, parts):
        handed.extend(p.num_rows for p in parts)
        return [f"out of {p.num_rows}" for p in parts]
    monkeypatch.setattr(bucket_pool, "_mapped", mapped)
    monkeypatch.setattr(bucket_pool, "_pool", lambda workers: None)
    parts = [_Part(n) for n in (5, 40, 5, 70, 0)]
    outs = bucket_pool._in_pool((), parts, 2)  # noqa: SLF001
    assert handed == [70, 40, 5, 5, 0]  # ties in bucket order
    assert outs == ["out of 5", "out of 40", "out of 5", "out of 70", "out of 0"]


def test_a_broken_pool_hands_the_buckets_back(monkeypatch):
    monkeypatch.setattr(bucket_pool, "_mapped", lambda *args: None)
    monkeypatch.setattr(bucket_pool, "_pool", lambda workers: None)
    assert bucket_pool._in_pool((), [_Part(1), _Part(2)], 2) is None  # noqa: SLF001
