"""``iri-scrapy dedupe --spark``: read a text or Parquet file into Spark, run
:func:`iri_scrapy.integrations.spark.dedupe`, write what the local command writes.

Imported by :mod:`iri_scrapy.cli.main` only when ``--spark`` is given (pyspark is
an optional dependency).
"""

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf

from iri_scrapy.integrations.spark import classify, dedupe
from iri_scrapy.store.dedupe import (
    MAX_CLUSTER_SPELLINGS,
    MAX_CLUSTERS,
    MAX_SAMPLED_LENGTH,
    DedupeStats,
    Reject,
    Samples,
    _host_of,
)


def _first_string_column(df: DataFrame, names: Iterable[str] = ("url", "uri", "iri")) -> str:
    for name in names:
        if name in df.columns:
            return name
    for f in df.schema.fields:
        if isinstance(f.dataType, (T.StringType, T.BinaryType)):
            return f.name
    raise ValueError("no string column in the input")


_MASTER_PREFIXES = ("local", "spark://", "yarn", "k8s://", "mesos://")


def is_master(text: str) -> bool:
    """Whether *text* names a Spark master (``local[*]``, ``spark://h:7077``, ``yarn``...)."""
    return text.startswith(_MASTER_PREFIXES)


def session(master: str = "local[*]", app: str = "iri-scrapy dedupe") -> Any:
    """A SparkSession for *master*; the Python workers run this interpreter."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    if master.startswith("local"):
        inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
        cores = (os.cpu_count() or 1) if inner.strip() == "*" else int(inner.split(",")[0])
        builder = builder.config("spark.sql.shuffle.partitions", str(max(2, 2 * cores)))
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.ui.showConsoleProgress", "false").config(
        "spark.sql.adaptive.enabled", "true")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_lines(spark: Any, path: str, column: str | None = None) -> tuple[DataFrame, str]:
    """The input of ``dedupe --spark``: a text file (or directory, or glob; any
    compression Spark reads) as one binary value per line split at LF, or a Parquet
    file or directory (path ending in ``.parquet``, or a directory of them) with
    *column* (default ``url``, ``uri``, ``iri`` or its first string column).

    Returns the DataFrame with ``value`` and ``line_id`` (increasing in file order:
    ``monotonically_increasing_id``, the partition index in the upper bits; see
    :func:`_line_column`) and the name of the value column.
    """
    if path.endswith(".parquet") or column is not None:
        df = spark.read.parquet(path)
        name = column or _first_string_column(df)
        if name not in df.columns:
            raise ValueError(f"no column {name!r} in {path}")
        df = df.select(F.col(name).alias("value"))
    else:
        # lineSep "\n": a CR inside a line stays (refused, as by the local CLI);
        # the value is cast to binary, so bytes that are not UTF-8 reach the core.
        df = spark.read.option("lineSep", "\n").text(path)
        df = df.select(F.col("value").cast("binary").alias("value"))
    return df.withColumn("line_id", F.monotonically_increasing_id()), "value"


def _line_column(offsets: dict[int, int], id_col: str = "line_id") -> Column:
    """The 1-based line number of an id of :func:`read_lines`, given the lines before
    each partition."""
    start = F.lit(0).cast("long")
    for p, off in offsets.items():
        start = F.when(F.shiftright(F.col(id_col), 33) == p, F.lit(off)).otherwise(start)
    return start + F.col(id_col).bitwiseAND(F.lit((1 << 33) - 1)) + 1


def _line(offsets: dict[int, int], line_id: int) -> int:
    return offsets.get(line_id >> 33, 0) + (line_id & ((1 << 33) - 1)) + 1


def _offsets(lines: dict[int, int]) -> dict[int, int]:
    """Lines before each partition, from the lines of each (every partition with a
    row has its counters; the ids of :func:`read_lines` carry the partition index in
    their upper bits)."""
    offsets, total = {}, 0
    for p in sorted(lines):
        offsets[p] = total
        total += lines[p]
    return offsets


def _bytes(value: Any) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def _write_local(unique: DataFrame, stream: Any, canonical: bool, out: str | None) -> None:
    """Write the ``text`` of *unique* (ordered) to *stream* through Spark's text writer
    into a temporary directory (next to OUT), then its part files in order: no row
    passes through the driver's Python.  The unique lines are UTF-8 (a line that is
    not was refused), so the cast to string keeps their bytes; a final CR is dropped,
    as the local CLI drops it."""
    import os
    import shutil
    import tempfile

    text = F.col("text").cast("string")
    if not canonical:
        text = F.regexp_replace(text, "\r$", "")
    where = os.path.dirname(os.path.abspath(out)) if out not in (None, "-") else None
    tmp = tempfile.mkdtemp(prefix=".iri-dedupe-", dir=where)
    try:
        unique.select(text.alias("value")).write.mode("overwrite").option(
            "lineSep", "\n").text(os.path.join(tmp, "lines"))
        parts = sorted(n for n in os.listdir(os.path.join(tmp, "lines"))
                       if n.startswith("part-"))
        for name in parts:
            with open(os.path.join(tmp, "lines", name), "rb") as f:
                shutil.copyfileobj(f, stream, 1 << 20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hosts_of(keys: pa.Array) -> pa.Array:
    """The host of each canonical key (:func:`iri_scrapy.store.dedupe._host_of`)."""
    return pa.array([_host_of(key) for key in keys.to_pylist()], pa.string())


def report_samples(df: DataFrame, col: str, args: Any, hosts: int = 100) -> Samples:
    """What ``--report`` shows besides the counters, as the local command's
    :class:`~iri_scrapy.store.dedupe.Samples`, from the whole input (two small
    aggregations on the canonical keys): the *hosts* hosts with most duplicate
    spellings (exact counts: never pruned), and up to
    :data:`~iri_scrapy.store.dedupe.MAX_CLUSTERS` resources met under several
    spellings, in the order their second spelling came, each with its first
    :data:`~iri_scrapy.store.dedupe.MAX_CLUSTER_SPELLINGS` distinct spellings in
    input order (none longer than :data:`~iri_scrapy.store.dedupe.MAX_SAMPLED_LENGTH`).
    The local command samples among its last 4,096 first spellings: on an input
    with more resources the clusters shown may differ, not their kind."""
    key = classify(F.col(col), args.level, keep_fragment=args.keep_fragment, nfc=args.nfc,
                   with_rungs=False)["key"]
    # A URL line is UTF-8 (one that is not is refused: no key), without its CR, as read.
    text = F.regexp_replace(F.col(col).cast("string"), "\r$", "")
    rows = df.select("line_id", text.alias("line"), key.alias("key")).where(
        F.col("key").isNotNull())
    host = arrow_udf(_hosts_of, T.StringType())  # type: ignore[call-overload]
    per_host = rows.groupBy("key").agg(F.count(F.lit(1)).alias("n")).where(
        F.col("n") > 1).groupBy(host("key").alias("host")).agg(
        F.sum(F.col("n") - 1).alias("d")).orderBy(F.desc("d"), "host").limit(hosts).collect()
    spellings = rows.where(F.length("line") <= MAX_SAMPLED_LENGTH).groupBy(
        "key", "line").agg(F.min("line_id").alias("at"))
    # A cluster forms where the local command forms it: at its second distinct spelling.
    nth = F.row_number().over(Window.partitionBy("key").orderBy("at"))
    ranked = spellings.withColumn("nth", nth).where(F.col("nth") <= MAX_CLUSTER_SPELLINGS)
    formed = ranked.where(F.col("nth") == 2).select(
        "key", F.col("at").alias("formed")).orderBy("formed").limit(MAX_CLUSTERS)
    picked = ranked.join(F.broadcast(formed), "key").orderBy("formed", "at").collect()
    samples = Samples(hosts={r["host"]: int(r["d"]) for r in per_host})
    for r in picked:
        samples.clusters.setdefault(r["key"], []).append(r["line"])
    return samples


def cli_dedupe(args: Any) -> tuple[DedupeStats, Samples | None]:
    """``iri-scrapy dedupe --spark``: the local command's job and report on Spark.

    Writes the unique lines (as given, or canonical in ``--form`` with
    ``--canonical``) in input order to ``-o`` (a text file, stdout, or a Parquet
    directory when OUT ends in ``.parquet``) and the refused lines to
    ``--rejects``.  Returns the statistics for the closing report and, with
    ``--report``, what the page shows besides them (:func:`report_samples`).
    """
    import sys

    spark = session(args.spark)
    df, col = read_lines(spark, args.input, getattr(args, "column", None))
    job = dedupe(df, col, args.level, order_by="line_id", ordered_partitions=True,
                 unique_order=True,
                 keep_fragment=args.keep_fragment, nfc=args.nfc, canonical=args.canonical,
                 form=args.form, rung_stats=args.rung_stats, keys=False,
                 drop_query_params=args.drop_query_params,
                 sort_query=args.sort_query).persist()
    try:
        stats = job.stats(args.max_listed)
        parquet = (args.output or "").endswith(".parquet")
        offsets = _offsets(job.partition_lines()) if stats.rejects or parquet else {}
        stats.rejects = [Reject(_line(offsets, r.line), r.error) for r in stats.rejects]
        if args.canonical:
            text = F.col("iri_out")
        elif isinstance(df.schema[col].dataType, T.BinaryType):
            text = F.col(col)
        else:
            text = F.col(col).cast("binary")
        unique = job.unique.select("line_id", text.alias("text")).orderBy("line_id")
        out = args.output
        if out is not None and out.endswith(".parquet"):
            unique.select(F.col("text").cast("string").alias("url"),
                          _line_column(offsets).alias("line")).write.mode(
                "overwrite").parquet(out)
        else:
            stream = (sys.stdout.buffer if out in (None, "-")
                      else open(out, "wb"))  # noqa: SIM115
            try:
                if args.spark.startswith("local"):
                    _write_local(unique, stream, args.canonical, out)
                else:
                    for row in unique.toLocalIterator(prefetchPartitions=True):
                        data = _bytes(row["text"])
                        if not args.canonical and data.endswith(b"\r"):
                            data = data[:-1]  # as the local CLI: the line without CR LF
                        stream.write(data + b"\n")
            finally:
                if stream is sys.stdout.buffer:
                    stream.flush()
                else:
                    stream.close()
        if args.rejects:
            rej = job.rejects.select("line_id", F.col(col).alias("text")).orderBy("line_id")
            with open(args.rejects, "wb") as f:
                for row in rej.toLocalIterator(prefetchPartitions=True):
                    f.write(_bytes(row["text"]) + b"\n")
        samples = report_samples(df, col, args) if args.report is not None else None
    finally:
        job.unpersist()
    return stats, samples
