"""iri_scrapy on Apache Spark: canonical keys as vectorized column functions, and dedupe.

``pip install "iri-scrapy[spark]"`` (pyspark 4.1+, pyarrow; Spark 4 needs Java 17+).
Nothing else in the package imports this module, so the core stays importable
without pyspark.

The column functions are Arrow UDFs (``arrow_udf``, Spark 4.1+): Spark hands the
Python worker Arrow record batches (``spark.sql.execution.arrow.maxRecordsPerBatch``
rows, 10,000 by default) and gets one Arrow array back, so the JVM-Python traffic
is columnar, with no pandas in between;
each value is then canonicalized by the same core functions the local
``iri-scrapy dedupe`` uses (:func:`iri_scrapy.dedupe.canonical_and_rungs`,
:func:`iri_scrapy.dedupe.refusal`, :func:`iri_scrapy.normalize`), so the keys
are those of :func:`iri_scrapy.normalize`, row for row.

Caches: the core's host caches (IDNA conversions) are module-level
``functools.lru_cache`` s; each Python worker process has its own, warm for as
long as Spark reuses the worker (``spark.python.worker.reuse``, on by default),
shared by nothing.  They are a speed-up only: a cold cache gives the same keys.

* :func:`retrieval_key` -- the canonical key of each value (``null`` when it has none);
* :func:`rungs` -- the rungs of the RFC 3987 section 5.3 ladder that changed it;
* :func:`classify` -- both at once, with the refusal message and a blank flag;
* :func:`dedupe` -- the first spelling (by an order column) of each resource, the
  rejected rows with their error (never dropped), and the report's counters.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf

from .dedupe import RUNG_KEYS, DedupeStats, Reject, canonical_and_rungs, refusal
from .errors import IRIError
from .ladder import Form, Level, normalize
from .parsing import preprocess

__all__ = [
    "CLASSIFY_SCHEMA", "classify", "retrieval_key", "rungs", "rung_names", "dedupe",
    "SparkDedupe",
]

#: The struct :func:`classify` returns: ``key`` (the canonical URI that decides
#: equality; null for a blank or rejected value), ``rungs`` (a bit mask: bit *i* set
#: when rung ``RUNG_KEYS[i]`` changed the value; 0 when it was already canonical;
#: :func:`rungs` gives the names), ``out`` (the value in *form* when asked, else
#: null), ``error`` (why the value was refused; null otherwise), ``blank`` (empty or
#: white space only).
CLASSIFY_SCHEMA = T.StructType([
    T.StructField("key", T.StringType()),
    T.StructField("rungs", T.IntegerType()),
    T.StructField("out", T.StringType()),
    T.StructField("error", T.StringType()),
    T.StructField("blank", T.BooleanType()),
])


#: Bit of each rung in the ``rungs`` mask.
_BIT = {key: 1 << i for i, key in enumerate(RUNG_KEYS)}


def _udf(fn: Any, return_type: T.DataType) -> Any:
    # Scalar: the type hints of fn say pa.Array -> pa.Array.
    return arrow_udf(fn, return_type)  # type: ignore[call-overload]


def _text(value: Any) -> str:
    """A value as the local CLI reads a line: bytes decoded as UTF-8 with undecodable
    bytes kept as surrogate escapes (refused later, with their column), a final CR
    dropped (the line was split at LF)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        return raw.decode("utf-8", "surrogateescape")
    return str(value)


def _values(values: pa.Array) -> list[Any]:
    """The Python values of an Arrow batch; a binary batch (lines of a text file) that
    is all UTF-8 is decoded and stripped of a final CR by Arrow, in C (the common
    case); otherwise each value goes through :func:`_text`."""
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        try:
            strings = values.cast(pa.string())
        except pa.ArrowInvalid:  # a byte that is not UTF-8: value by value, with _text
            return values.to_pylist()
        import pyarrow.compute as pc

        return pc.replace_substring_regex(strings, pattern="\r$", replacement="",
                                          max_replacements=1).to_pylist()
    return values.to_pylist()


def _classifier(level: Level, keep_fragment: bool, nfc: bool, form: Form | None,
                with_rungs: bool) -> Any:
    """The per-batch function: what ``Deduper.process`` decides for each value."""

    def run(values: pa.Array) -> pa.Array:
        keys: list[str | None] = []
        masks: list[int | None] = []
        outs: list[str | None] = []
        errors: list[str | None] = []
        blanks: list[bool] = []
        for value in _values(values):
            key = out = error = None
            mask: int | None = None
            blank = False
            if value is None:
                error = "null value: not a URL"
            else:
                line = _text(value)
                if not preprocess(line):
                    blank = True
                else:
                    error = refusal(line)
                    if error is None:
                        try:
                            if with_rungs:
                                key, found = canonical_and_rungs(
                                    line, level, keep_fragment=keep_fragment, nfc=nfc)
                                mask = 0
                                for rung in found:
                                    mask |= _BIT[rung.key]
                            else:
                                key = normalize(line, level, keep_fragment=keep_fragment,
                                                nfc=nfc)
                            if form is not None:
                                out = key if form == "uri" else normalize(
                                    line, level, form=form, keep_fragment=keep_fragment,
                                    nfc=nfc)
                        except IRIError as exc:
                            key = out = None
                            mask = None
                            error = str(exc)
            keys.append(key)
            masks.append(mask)
            outs.append(out)
            errors.append(error)
            blanks.append(blank)
        return pa.StructArray.from_arrays(
            [pa.array(keys, pa.string()), pa.array(masks, pa.int32()),
             pa.array(outs, pa.string()), pa.array(errors, pa.string()),
             pa.array(blanks, pa.bool_())],
            names=["key", "rungs", "out", "error", "blank"])

    return run


def _col(c: "Column | str") -> Column:
    return F.col(c) if isinstance(c, str) else c


def classify(
    col: "Column | str",
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = False,
    nfc: bool = False,
    form: Form | None = None,
    with_rungs: bool = True,
) -> Column:
    """A struct column (:data:`CLASSIFY_SCHEMA`) for a string or binary column of URLs.

    Binary values are read as the CLI reads a line (UTF-8, undecodable bytes
    refused with their column); ``keep_fragment`` defaults to False, the
    retrieval key (RFC 3987 section 5.1), as in ``iri-scrapy dedupe``.
    """
    fn = _classifier(Level.coerce(level), keep_fragment, nfc, form, with_rungs)
    return _udf(fn, CLASSIFY_SCHEMA)(_col(col))


def retrieval_key(
    col: "Column | str",
    level: Level | int | str = Level.SCHEME,
    *,
    form: Form = "uri",
    keep_fragment: bool = False,
    nfc: bool = False,
) -> Column:
    """``normalize(value, level, form=form, keep_fragment=..., nfc=...)`` of each value,
    null when the value is blank, null, refused or has no canonical form (use
    :func:`classify` for the reason)."""
    lvl = Level.coerce(level)

    def run(values: pa.Array) -> pa.Array:
        out: list[str | None] = []
        for value in _values(values):
            if value is None:
                out.append(None)
                continue
            try:
                out.append(normalize(_text(value), lvl, form=form,
                                     keep_fragment=keep_fragment, nfc=nfc))
            except IRIError:
                out.append(None)
        return pa.array(out, pa.string())

    return _udf(run, T.StringType())(_col(col))


def rungs(
    col: "Column | str",
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = False,
    nfc: bool = False,
) -> Column:
    """The rungs (their keys: ``case``, ``percent``, ``path``, ``scheme``...) that changed
    each value on its way to the canonical form, in ladder order; an empty array
    when it was already canonical (``simple``), null when it has none."""
    return rung_names(classify(col, level, keep_fragment=keep_fragment, nfc=nfc)["rungs"])


def rung_names(mask: Column) -> Column:
    """The rung keys of a ``rungs`` bit mask of :func:`classify`, in ladder order."""
    picked = F.array_compact(F.array(*[
        F.when(mask.bitwiseAND(bit) != 0, F.lit(key)) for key, bit in _BIT.items()]))
    return F.when(mask.isNull(), F.lit(None)).otherwise(picked)


@dataclass
class SparkDedupe:
    """What :func:`dedupe` returns; the DataFrames are lazy, :meth:`stats` runs a job.

    ``unique``: the rows of the first spelling of each resource, with columns
    ``iri_key`` (canonical URI) and ``iri_out`` (the value in *form* when
    ``canonical`` was asked, else null) added.  ``rejects``: the refused rows
    with ``iri_error``.  ``ranked``: every row with the classification struct
    ``iri`` and ``iri_first`` (true for the kept spelling).
    """

    classified: DataFrame
    ranked: DataFrame
    unique: DataFrame
    rejects: DataFrame
    order_by: str
    col: str
    level: Level
    rung_stats: bool

    def stats(self, max_rejects: int = 20) -> DedupeStats:
        """The counters of the run, as ``iri-scrapy dedupe`` reports them.

        ``rejects`` lists the first *max_rejects* refused rows by the order
        column; their ``line`` is the order column's value (the CLI orders by
        line number).
        """
        # One aggregation by key (combined map-side before the shuffle), then a global one:
        # a key's first row is its smallest order value; its duplicates are the others.
        iri = F.col("iri")
        mask = iri["rungs"]
        per_key = [F.count(F.lit(1)).alias("n"),
                   # the same first as ``unique``'s: ties in the order broken by the value
                   F.min(F.struct(F.col(self.order_by), F.col(self.col), mask.alias("m"))
                         )["m"].alias("first"),
                   F.sum(F.when(iri["blank"], 1).otherwise(0)).alias("blank"),
                   F.sum(F.when(iri["error"].isNotNull(), 1).otherwise(0)).alias("bad")]
        bits = [(k, _BIT[k]) for k in RUNG_KEYS if k != "simple"]
        if self.rung_stats:
            per_key.append(F.sum(F.when(mask == 0, 1).otherwise(0)).alias("r_simple"))
            per_key.extend(F.sum(F.when(mask.bitwiseAND(b) != 0, 1).otherwise(0)).alias(f"r_{k}")
                           for k, b in bits)
        groups = self.classified.groupBy(iri["key"].alias("k")).agg(*per_key)
        ok = F.col("k").isNotNull()

        def total(value: Column) -> Column:
            return F.sum(F.when(ok, value).otherwise(0))

        totals = [F.sum("n").alias("lines"), F.count(F.when(ok, 1)).alias("unique"),
                  total(F.col("n") - 1).alias("duplicates"), F.sum("blank").alias("blank"),
                  F.sum("bad").alias("unparseable")]
        if self.rung_stats:
            totals.append(total(F.col("r_simple") - F.when(F.col("first") == 0, 1).otherwise(0)
                                ).alias("r_simple"))
            totals.extend(total(F.col(f"r_{k}") - F.when(
                F.col("first").bitwiseAND(b) != 0, 1).otherwise(0)).alias(f"r_{k}")
                for k, b in bits)
        row = groups.agg(*totals).collect()[0].asDict()
        stats = DedupeStats(
            lines=int(row["lines"] or 0), unique=int(row["unique"] or 0),
            duplicates=int(row["duplicates"] or 0), blank=int(row["blank"] or 0),
            unparseable=int(row["unparseable"] or 0),
        )
        if self.rung_stats:
            for k in RUNG_KEYS:
                stats.by_rung[k] = int(row[f"r_{k}"] or 0)
        if stats.unparseable and max_rejects:
            first = (self.rejects.select(self.order_by, "iri_error")
                     .orderBy(self.order_by).limit(max_rejects).collect())
            stats.rejects = [Reject(int(r[0]), r[1]) for r in first]
        return stats


def dedupe(
    df: DataFrame,
    col: str,
    level: Level | int | str = Level.SCHEME,
    *,
    order_by: str | None = None,
    keep_fragment: bool = False,
    nfc: bool = False,
    canonical: bool = False,
    form: Form = "uri",
    rung_stats: bool = True,
) -> SparkDedupe:
    """Keep the first spelling of each distinct resource of column *col* of *df*.

    Two values are the same resource when their canonical URIs at *level* are
    equal (as in :class:`iri_scrapy.dedupe.Deduper`); "first" is the smallest
    *order_by* value (ties broken by the value itself), so the result does not
    depend on partitioning.  Without *order_by* a ``monotonically_increasing_id``
    is used: the order of the input's partitions, which for one text file is
    the order of its lines.  Rows that are not URLs, or have no canonical form,
    go to ``rejects`` with their error message; blank rows are counted and
    dropped.  Duplicates are counted per rung of the ladder that changed their
    spelling (``simple`` when already canonical), like the local CLI.
    """
    lvl = Level.coerce(level)
    x = df
    if order_by is None:
        order_by = "iri_order"
        x = x.withColumn(order_by, F.monotonically_increasing_id())
    x = x.withColumn("iri", classify(col, lvl, keep_fragment=keep_fragment, nfc=nfc,
                                     form=form if canonical else None,
                                     with_rungs=rung_stats))
    key = F.col("iri")["key"]
    # Rows without a key each get a group of their own (no skew on a null key).
    group = F.coalesce(key, F.concat(F.lit("\x00"), F.col(order_by).cast("string")))
    w = Window.partitionBy(group).orderBy(F.col(order_by), F.col(col))
    ranked = x.withColumn("iri_first", key.isNotNull() & (F.row_number().over(w) == 1))
    unique = ranked.where(F.col("iri_first")).select(
        *df.columns, *([order_by] if order_by not in df.columns else []),
        key.alias("iri_key"), F.col("iri")["out"].alias("iri_out"))
    rejects = x.where(F.col("iri")["error"].isNotNull()).select(
        *df.columns, *([order_by] if order_by not in df.columns else []),
        F.col("iri")["error"].alias("iri_error"))
    return SparkDedupe(x, ranked, unique, rejects, order_by, col, lvl, rung_stats)


def _first_string_column(df: DataFrame, names: Iterable[str] = ("url", "uri", "iri")) -> str:
    for name in names:
        if name in df.columns:
            return name
    for field in df.schema.fields:
        if isinstance(field.dataType, (T.StringType, T.BinaryType)):
            return field.name
    raise ValueError("no string column in the input")


# --- iri-scrapy dedupe --spark --------------------------------------------------------

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
    :func:`line_numbers`) and the name of the value column.
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


def line_numbers(df: DataFrame, id_col: str = "line_id") -> dict[int, int]:
    """``{partition: lines before it}`` for the ids of :func:`read_lines` (a small
    job: a count per partition); line = offset + (id & (2**33 - 1)) + 1."""
    counts = (df.select(F.shiftright(F.col(id_col), 33).alias("p")).groupBy("p").count()
              .orderBy("p").collect())
    offsets, total = {}, 0
    for row in counts:
        offsets[int(row["p"])] = total
        total += int(row["count"])
    return offsets


def _line(offsets: dict[int, int], line_id: int) -> int:
    return offsets[line_id >> 33] + (line_id & ((1 << 33) - 1)) + 1


def _line_column(offsets: dict[int, int], id_col: str = "line_id") -> Column:
    start = F.lit(0).cast("long")
    for p, off in offsets.items():
        start = F.when(F.shiftright(F.col(id_col), 33) == p, F.lit(off)).otherwise(start)
    return start + F.col(id_col).bitwiseAND(F.lit((1 << 33) - 1)) + 1


def cli_dedupe(args: Any) -> DedupeStats:
    """``iri-scrapy dedupe --spark``: the local command's job and report on Spark.

    Writes the unique lines (as given, or canonical in ``--form`` with
    ``--canonical``) in input order to ``-o`` (a text file, stdout, or a Parquet
    directory when OUT ends in ``.parquet``) and the refused lines to
    ``--rejects``.  Returns the statistics for the closing report.
    """
    import sys

    spark = session(args.spark)
    df, col = read_lines(spark, args.input, getattr(args, "column", None))
    job = dedupe(df, col, args.level, order_by="line_id", keep_fragment=args.keep_fragment,
                 nfc=args.nfc, canonical=args.canonical, form=args.form,
                 rung_stats=args.rung_stats)
    job.classified.persist()
    try:
        stats = job.stats(args.max_listed)
        offsets = line_numbers(job.classified) if stats.rejects or (
            args.output or "").endswith(".parquet") else {}
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
                for row in unique.toLocalIterator():
                    value = row["text"]
                    data = value.encode("utf-8", "surrogateescape") if isinstance(
                        value, str) else bytes(value)
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
                for row in rej.toLocalIterator():
                    value = row["text"]
                    data = value.encode("utf-8", "surrogateescape") if isinstance(
                        value, str) else bytes(value)
                    f.write(data + b"\n")
    finally:
        job.classified.unpersist()
    return stats
