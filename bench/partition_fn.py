"""Instance assignment cost: HASH vs the seed's custom block compiled vs the same block interpreted.

    python bench/partition_fn.py [--rows 1000000] [--repeat 3]

One Spark run (local[2]); the input (ISIN-like strings) is generated and cached first, then each
path assigns instances to every row and writes to the noop sink. HASH and the compiled block run
interleaved --repeat times; the median ratio of the pairs is the figure (robust to machine load).
Target (issue 4): compiled path at most 1.2 times HASH.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from pyspark.sql import functions as F

# Run as a script, this directory is sys.path[0], where bench/runtime.py would shadow the
# runtime package.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from ccl.plan.partition_functions import why_not_compilable  # noqa: E402
from ccl.syntax.parser import parse_text  # noqa: E402
from runtime.partition_fn import assign_instances, column_kinds  # noqa: E402
from runtime.session import get_session  # noqa: E402

SEED = """CREATE INPUT STREAM priceW SCHEMA (isin string, price float);
CREATE OUTPUT WINDOW maxPriceW PRIMARY KEY DEDUCED KEEP 5 MINUTES
PARTITION BY priceW {spec} PARTITIONS 2
AS SELECT upper(left(priceW.isin, 1)) isin, max(priceW.price) maxPrice FROM priceW
GROUP BY upper(left(priceW.isin, 1));"""

CUSTOM = ("{ integer hashValue := ascii(substr(priceW.isin, 1, 1)); "
          "return hashValue % maxPriceW_partitions; }")
# The same function with a loop that runs once: outside the compilable subset, so interpreted.
INTERPRETED = ("{ integer hashValue := 0; integer k := 0; while (k < 1) { "
               "hashValue := ascii(substr(priceW.isin, 1, 1)); k := k + 1; } "
               "return hashValue % maxPriceW_partitions; }")


def spec_of(text: str):
    project, diags = parse_text(SEED.format(spec=text))
    assert not diags, diags
    return project.statements[1].partition.specs[0]


def run_once(df, spec) -> tuple[float, str]:
    """Seconds to assign instances to every row (noop sink), and the path taken."""
    why = (why_not_compilable(spec.body, "priceW", column_kinds(df.schema), "maxPriceW_partitions")
           if spec.body is not None else None)
    out, how = assign_instances(df, spec, "priceW", "maxPriceW", 2, why_not=why)
    start = time.perf_counter()
    out.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start, how.path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    spark = get_session("local[2]", app_name="bench-partition-fn", shuffle_partitions=2)
    letters = F.lit("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    df = (spark.range(args.rows)
          .select(F.concat(F.substring(letters, (F.col("id") % 26 + 1).cast("int"), 1),
                           F.substring(letters, (F.col("id") % 7 + 1).cast("int"), 1),
                           F.lpad((F.col("id") % 1000003).cast("string"), 10, "0")).alias("isin"),
                  (F.col("id") % 1000 / 10.0).alias("price"))
          .cache())
    df.count()
    hash_spec, compiled_spec = spec_of("HASH(isin)"), spec_of(CUSTOM)
    run_once(df, hash_spec)  # warm-up: code generation, first-job costs
    pairs = []
    for _ in range(args.repeat):  # interleaved, so that load on the machine hits both alike
        (h, _), (c, path) = run_once(df, hash_spec), run_once(df, compiled_spec)
        assert path == "compiled", path
        pairs.append((h, c))
    interpreted, path = run_once(df, spec_of(INTERPRETED))
    assert path == "interpreter", path
    best_h, best_c = min(h for h, _ in pairs), min(c for _, c in pairs)
    ratios = sorted(c / h for h, c in pairs)
    for label, seconds in (("HASH(isin)", best_h), ("custom, compiled", best_c),
                           ("custom, interpreter UDF", interpreted)):
        print(f"{label:<24} {seconds:7.3f} s  {args.rows / seconds:>12,.0f} rows/s")
    print(f"compiled / HASH: median of {len(ratios)} interleaved pairs {ratios[len(ratios) // 2]:.2f}, "
          f"best times {best_c / best_h:.2f}; interpreter / HASH: {interpreted / best_h:.1f}")
    spark.stop()


if __name__ == "__main__":
    main()
