"""Benchmark: the dedupe job on Spark (iri_scrapy.spark) vs the local CLI and vs w3lib.

Run from the repository root (needs the ``spark`` extra and Java 17+)::

    python benchmarks/bench_spark.py [--rows 300000] [--master local[2]] [--input FILE]

The data: ``../shared/corpus/urls_real.txt`` (relative to the repository),
replicated to ``--rows`` lines in a temporary file.  Three jobs on it:

1. ``iri-scrapy dedupe FILE -o /dev/null -q``: the local CLI, one process, one core
   (wall time of the subprocess, interpreter start included);
2. the Spark job of ``iri-scrapy dedupe --spark``: read the text file, classify
   each line with the Arrow-batched UDF (canonical key, rungs, refusals), keep
   the first line of each key (window by key ordered by line number), and
   compute the full report (counts, per-rung counts, listed rejects);
3. the same Spark job with w3lib's ``canonicalize_url`` as the key, in a plain
   (row-at-a-time, pickled) Python UDF, first line of each key kept the same way.

Jobs 2 and 3 run in one SparkSession (started, and warmed up on a small file,
before timing); the three jobs run in turn, best of ``--repeat`` rounds each.
Rows/s per core divides by the master's core count (``local[N]``) and, for the
local CLI, by 1.  Prints the ratios; the targets are Spark >= 3x the w3lib Spark
job, and Spark per core within 2x of the local CLI (CLI / Spark per core <= 2).

Prints a skip notice and exits 0 when the corpus is absent.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus" / "urls_real.txt"


def _replicate(src: Path, rows: int, dest: Path) -> int:
    lines = src.read_bytes().splitlines()
    with open(dest, "wb") as f:
        n = 0
        while n < rows:
            chunk = lines[: rows - n]
            f.write(b"\n".join(chunk) + b"\n")
            n += len(chunk)
    return n


def _cores(master: str) -> int:
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    if master == "local":
        return 1
    return os.cpu_count() or 1


def _local_cli(path: Path) -> float:
    exe = [sys.executable, "-m", "iri_scrapy", "dedupe", str(path), "-o", os.devnull, "-q"]
    start = time.perf_counter()
    subprocess.run(exe, check=False, cwd=ROOT)
    return time.perf_counter() - start


def _spark_jobs(spark: object, path: Path) -> tuple[float, float, int, int]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from w3lib.url import canonicalize_url

    from iri_scrapy.spark import dedupe, read_lines

    def ours() -> tuple[float, int]:
        start = time.perf_counter()
        df, col = read_lines(spark, str(path))
        stats = dedupe(df, col, order_by="line_id").stats()
        return time.perf_counter() - start, stats.unique

    # A plain Python UDF, rows pickled one by one (useArrow=False: the same with or
    # without pandas, which Spark 4 needs for its Arrow-optimized plain UDFs).
    @F.udf(T.StringType(), useArrow=False)
    def w3lib_key(value):  # type: ignore[no-untyped-def]
        if value is None:
            return None
        try:
            return canonicalize_url(value)
        except Exception:  # w3lib raises on some lines; they have no key
            return None

    def w3lib() -> tuple[float, int]:
        start = time.perf_counter()
        df = spark.read.option("lineSep", "\n").text(str(path))  # type: ignore[attr-defined]
        df = df.withColumn("line", F.monotonically_increasing_id())
        df = df.withColumn("key", w3lib_key("value")).where(F.col("key").isNotNull())
        w = Window.partitionBy("key").orderBy("line")
        unique = df.withColumn("r", F.row_number().over(w)).where(F.col("r") == 1).count()
        return time.perf_counter() - start, unique

    return (*ours(), *w3lib())  # type: ignore[return-value]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--input", type=Path, default=CORPUS)
    args = parser.parse_args()
    if not args.input.exists():
        print(f"skip: {args.input} not found")
        return 0
    from iri_scrapy.spark import session

    cores = _cores(args.master)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "urls.txt"
        rows = _replicate(args.input, args.rows, data)
        warm = Path(tmp) / "warm.txt"
        _replicate(args.input, 5_000, warm)
        print(f"{rows:,} rows ({args.input.name} replicated), master {args.master} "
              f"({cores} cores), load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs")
        spark = session(args.master, "bench_spark")
        _spark_jobs(spark, warm)  # JVM, Python workers, imports: warm
        cli, ours, w3 = float("inf"), float("inf"), float("inf")
        for _ in range(args.repeat):  # interleaved, best of each
            cli = min(cli, _local_cli(data))
            t_ours, u_ours, t_w3, u_w3 = _spark_jobs(spark, data)
            ours, w3 = min(ours, t_ours), min(w3, t_w3)
        spark.stop()  # type: ignore[attr-defined]
    cli_rate = rows / cli
    ours_rate = rows / ours / cores
    w3_rate = rows / w3 / cores
    print(f"{'job':<44} {'seconds':>8} {'rows/s/core':>12}")
    print(f"{'local CLI (iri-scrapy dedupe), 1 core':<44} {cli:>8.2f} {cli_rate:>12,.0f}")
    print(f"{'Spark: iri_scrapy.spark dedupe + report':<44} {ours:>8.2f} {ours_rate:>12,.0f}")
    print(f"{'Spark: w3lib canonicalize_url, Python UDF':<44} {w3:>8.2f} {w3_rate:>12,.0f}")
    print(f"unique: iri_scrapy {u_ours:,}, w3lib {u_w3:,}")
    print(f"Spark iri_scrapy / Spark w3lib: {ours_rate / w3_rate:.2f}x (target >= 3x)")
    print(f"local CLI / Spark iri_scrapy, per core: {cli_rate / ours_rate:.2f}x "
          f"(target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
