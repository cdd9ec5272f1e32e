"""Benchmark: the dedupe job on Spark (iri_scrapy.integrations.spark) vs the local CLI and vs w3lib.

Run from the repository root (needs the ``spark`` extra and Java 17+)::

    python benchmarks/bench_spark.py [--rows 300000,1200000] [--master local[2]]
                                     [--input FILE] [--repeat 3] [--profile]

The data: ``../shared/corpus/urls_real.txt`` (relative to the repository, 91,424
lines, 91,336 distinct resources), replicated to each ``--rows`` size in a
temporary file (1.2M lines is about the 1.19M-line dump of issue 14's CLI figure;
the copies are exact duplicates, which the Python pass drops within a partition).
The fixed cost of each job (the same jobs on 5,000 lines in the warm session:
planning, code generation, task start-up) is printed first: it weighs on small
inputs only.  With ``--distinct`` each copy after the first is made a different
resource (``c<N>.`` put before what follows ``://``), so that nothing is dropped
within a partition and the aggregation sees every line.  Jobs on each size, in
interleaved rounds (best of ``--repeat`` each):

1. ``iri-scrapy dedupe FILE -o /dev/null --json-report R -q``: the local CLI, one
   process, one core; its time is the report's ``elapsed_seconds`` (the job, without
   the interpreter's start-up, as the Spark jobs are timed in a warm session);
2. ``spark``: the dedupe of ``iri-scrapy dedupe --spark``: read the text file, one
   Python pass per partition (key, rungs, fingerprint; the partition's duplicates
   dropped there), one aggregation by fingerprint, and the full report (counts,
   per-rung counts, listed rejects);
3. ``spark-cli``: all of ``iri-scrapy dedupe --spark FILE -o /dev/null`` in the warm
   session (also writes the unique lines in input order through the driver);
4. ``w3lib``: the same Spark dedupe with w3lib's ``canonicalize_url`` as the key, in a
   plain (row-at-a-time, pickled) Python UDF, first line of each key kept by the
   same aggregation (min of line id and line by key); no report.

Rows/s per core = rows / (wall seconds x cores the job used): the master's core
count (``local[N]``) for Spark (session and JVM started, and warmed up on a small
file, before timing), 1 for the local CLI.  Prints the ratios; the targets are
Spark >= 3x the w3lib Spark job, and Spark per core within 2x of the local CLI
(CLI / Spark per core <= 2).  ``--profile`` also times the stages of the Spark
job: the JVM's read of the file alone, the Arrow round trip to Python with an
identity UDF, and the Python pass without the aggregation.

The machine may be shared: the CPU seconds of each job are printed as well (for
Spark, of this process and all its descendants, the JVM and its Python workers,
from /proc; for the CLI, of the subprocess less the start-up of the same command
on an empty file), and rows per CPU second beside rows/s per core.

Prints a skip notice and exits 0 when the corpus is absent.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus" / "urls_real.txt"


def _replicate(src: Path, rows: int, dest: Path, distinct: bool = False) -> int:
    lines = src.read_bytes().splitlines()
    with open(dest, "wb") as f:
        n = copy = 0
        while n < rows:
            chunk = lines[: rows - n]
            if distinct and copy:
                tag = b"://c%d." % copy
                chunk = [line.replace(b"://", tag, 1) for line in chunk]
            f.write(b"\n".join(chunk) + b"\n")
            n += len(chunk)
            copy += 1
    return n


def _cores(master: str) -> int:
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    if master == "local":
        return 1
    return os.cpu_count() or 1


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _tree_cpu() -> float:
    """CPU seconds of this process and its descendants (the JVM, its Python workers),
    reaped children included, from /proc."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    me, total = os.getpid(), 0
    for pid, t in ticks.items():
        p = pid
        while p > 1 and p != me:
            p = parent.get(p, 0)
        if p == me:
            total += t
    return total / os.sysconf("SC_CLK_TCK")


def _local_cli(path: Path, tmp: Path) -> tuple[float, int, float]:
    """The CLI's elapsed seconds (its report), unique lines, CPU seconds (start-up less)."""
    report = tmp / "report.json"
    exe = [sys.executable, "-m", "iri_scrapy", "dedupe", str(path), "-o", os.devnull, "-q",
           "--json-report", str(report)]
    cpu = _children_cpu()
    subprocess.run(exe, check=False, cwd=ROOT)
    cpu = _children_cpu() - cpu
    doc = json.loads(report.read_text())
    empty = tmp / "empty.txt"
    empty.write_bytes(b"")
    start_cpu = _children_cpu()
    subprocess.run([*exe[:4], str(empty), *exe[5:]], check=False, cwd=ROOT)
    cpu -= _children_cpu() - start_cpu
    return float(doc["elapsed_seconds"]), int(doc["unique"]), cpu


def _timed(fn: Callable[[], int]) -> tuple[float, int, float]:
    cpu = _tree_cpu()
    start = time.perf_counter()
    n = fn()
    return time.perf_counter() - start, n, _tree_cpu() - cpu


def _spark_jobs(spark: Any, path: Path, master: str, profile: bool) -> dict[str, Callable[[], int]]:
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.functions import arrow_udf
    from w3lib.url import canonicalize_url

    from iri_scrapy.cli.dedupe_spark import cli_dedupe, read_lines
    from iri_scrapy.cli.main import build_parser
    from iri_scrapy.integrations.spark import dedupe

    def ours() -> int:
        df, col = read_lines(spark, str(path))
        # One job when there are no rejects (none in urls_real.txt): nothing to cache.
        return dedupe(df, col, order_by="line_id", ordered_partitions=True,
                      unique_order=True, keys=False).stats().unique

    def ours_cli() -> int:
        args = build_parser().parse_args(
            ["dedupe", str(path), f"--spark={master}", "-o", os.devnull, "-q"])
        return cli_dedupe(args)[0].unique

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

    def w3lib() -> int:
        df = spark.read.option("lineSep", "\n").text(str(path))
        df = df.withColumn("line", F.monotonically_increasing_id())
        df = df.withColumn("key", w3lib_key("value")).where(F.col("key").isNotNull())
        first = df.groupBy("key").agg(F.min(F.struct("line", "value")).alias("first"))
        return int(first.count())

    jobs: dict[str, Callable[[], int]] = {"spark": ours, "spark-cli": ours_cli,
                                          "w3lib": w3lib}
    if profile:
        def identity(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
            yield from batches

        ident = arrow_udf(identity, T.BinaryType())  # type: ignore[call-overload]

        def read_only() -> int:
            df, _ = read_lines(spark, str(path))
            return int(df.agg(F.sum(F.length("value"))).collect()[0][0])

        def arrow_round_trip() -> int:
            df, _ = read_lines(spark, str(path))
            return int(df.select(F.sum(F.length(ident("value")))).collect()[0][0])

        def python_pass() -> int:
            df, col = read_lines(spark, str(path))
            job = dedupe(df, col, order_by="line_id", ordered_partitions=True)
            return int(job.classified.agg(F.count(F.lit(1))).collect()[0][0])

        jobs.update({"read": read_only, "arrow": arrow_round_trip, "pass": python_pass})
    return jobs


def _report(rows: int, cores: int, best: dict[str, float], cpu: dict[str, float],
            unique: dict[str, int]) -> None:
    rate = {k: rows / v / (1 if k == "cli" else cores) for k, v in best.items()}
    labels = {
        "cli": "local CLI (iri-scrapy dedupe), 1 core",
        "spark": "Spark: iri_scrapy.integrations.spark dedupe + report",
        "spark-cli": "Spark: all of dedupe --spark -o /dev/null",
        "w3lib": "Spark: w3lib canonicalize_url, Python UDF",
        "read": "profile: JVM read of the lines only",
        "arrow": "profile: + Arrow round trip (identity UDF)",
        "pass": "profile: + the Python pass (no aggregation)",
    }
    per_cpu = {k: rows / v for k, v in cpu.items()}
    print(f"\n{rows:,} rows")
    print(f"{'job':<46} {'seconds':>8} {'rows/s/core':>12} {'CPU s':>7} {'rows/CPU s':>11}")
    for k, v in best.items():
        print(f"{labels[k]:<46} {v:>8.2f} {rate[k]:>12,.0f} {cpu[k]:>7.2f} "
              f"{per_cpu[k]:>11,.0f}")
    print("unique: " + ", ".join(f"{k} {unique[k]:,}" for k in ("cli", "spark", "spark-cli",
                                                                  "w3lib")))
    print(f"Spark iri_scrapy / Spark w3lib: {rate['spark'] / rate['w3lib']:.2f}x "
          f"(target >= 3x)")
    print(f"local CLI / Spark iri_scrapy, per core: {rate['cli'] / rate['spark']:.2f}x "
          f"(target <= 2x); with the lines written: {rate['cli'] / rate['spark-cli']:.2f}x")
    print(f"by CPU seconds: Spark / w3lib {per_cpu['spark'] / per_cpu['w3lib']:.2f}x, "
          f"CLI / Spark {per_cpu['cli'] / per_cpu['spark']:.2f}x, "
          f"CLI / Spark with the lines written {per_cpu['cli'] / per_cpu['spark-cli']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="300000,1200000",
                        help="input sizes, comma-separated (default: 300000,1200000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--input", type=Path, default=CORPUS)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--distinct", action="store_true",
                        help="make each copy of the corpus a different set of resources")
    args = parser.parse_args()
    if not args.input.exists():
        print(f"skip: {args.input} not found")
        return 0
    from iri_scrapy.cli.dedupe_spark import session

    sizes = [int(x) for x in str(args.rows).replace("_", "").split(",") if x.strip()]
    cores = _cores(args.master)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.txt"
        _replicate(args.input, 5_000, warm)
        print(f"sizes {', '.join(f'{n:,}' for n in sizes)} rows ({args.input.name} "
              f"replicated{', copies distinct' if args.distinct else ''}), "
              f"master {args.master} ({cores} cores), load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        spark = session(args.master, "bench_spark")
        small: dict[str, float] = {}
        for fn in _spark_jobs(spark, warm, args.master, args.profile).values():  # warm up
            fn()
        for name, fn in _spark_jobs(spark, warm, args.master, args.profile).items():
            small[name] = _timed(fn)[0]
        print("fixed cost of a job (the same jobs on 5,000 rows, warm): "
              + ", ".join(f"{k} {v:.2f}s" for k, v in small.items()))
        for size in sizes:
            best: dict[str, float] = {}
            cpu: dict[str, float] = {}
            unique: dict[str, int] = {}
            data = Path(tmp) / "urls.txt"
            rows = _replicate(args.input, size, data, args.distinct)
            jobs = _spark_jobs(spark, data, args.master, args.profile)
            for r in range(args.repeat):  # interleaved, best of each
                t, unique["cli"], c = _local_cli(data, Path(tmp))
                best["cli"] = min(best.get("cli", t), t)
                cpu["cli"] = min(cpu.get("cli", c), c)
                for name, fn in jobs.items():
                    t, unique[name], c = _timed(fn)
                    best[name] = min(best.get(name, t), t)
                    cpu[name] = min(cpu.get(name, c), c)
                print(f"{rows:,} rows, round {r + 1}: "
                      + ", ".join(f"{k} {v:.2f}s" for k, v in best.items()),
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
            results.append((rows, best, cpu, unique))
        spark.stop()
    for rows, best, cpu, unique in results:
        _report(rows, cores, best, cpu, unique)
    return 0


if __name__ == "__main__":
    sys.exit(main())
