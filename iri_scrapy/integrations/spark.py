"""iri_scrapy on Apache Spark: canonical keys as vectorized column functions, and dedupe.

``pip install "iri-scrapy[spark]"`` (or from a clone: ``pip install ".[spark]"``): pyspark
4.1+, pyarrow; Spark 4 needs Java 17+.
Nothing else in the package imports this module, so the core stays importable
without pyspark.

The column functions are Arrow UDFs (``arrow_udf``, Spark 4.1+): Spark hands the
Python worker Arrow record batches (``spark.sql.execution.arrow.maxRecordsPerBatch``
rows, 10,000 by default) and gets one Arrow array back, so the JVM-Python traffic
is columnar, with no pandas in between.  Each value is decided by the very code of
the local ``iri-scrapy dedupe``: :meth:`iri_scrapy.store.dedupe.Deduper.classify` (blank,
refusal, canonical key and rungs), :func:`iri_scrapy.store.dedupe.fingerprint` (the
64-bit key fingerprint the CLI's seen-set holds) and :meth:`Deduper.add`, so the
keys are those of :func:`iri_scrapy.normalize`, row for row, and two lines are
merged exactly when the CLI merges them.

:func:`dedupe` makes one Python pass per partition (an iterator Arrow UDF: key,
rung mask and fingerprint together, by the CLI's native batch loop,
:func:`iri_scrapy.store.dedupe_batch.records`, when it can take the options, the
lines it leaves by ``Deduper.classify``; when the order column increases along each
partition, the partition's duplicates are dropped there, before any shuffle, by a
per-partition :class:`~iri_scrapy.store.dedupe.Deduper`).  The pass gives each row an
array of what leaves it, exploded by Spark: nothing for a duplicate or a blank
line, one element for a first spelling or a refused line, and on the partition's
last row also its counters, one element each; then one aggregation by the
fingerprint (a ``long``) keeps the first row of each resource.

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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Form, Level, normalize
from iri_scrapy.core.query import rewrite_query
from iri_scrapy.store import dedupe_batch
from iri_scrapy.store.dedupe import (
    RUNG_KEYS,
    Deduper,
    DedupeStats,
    Outcome,
    Reject,
    fingerprint,
    written_form,
)

__all__ = ["dedupe", "SparkDedupe", "retrieval_key", "rungs", "classify"]

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
_MASK = {r: 1 << i for i, r in enumerate(RUNG_KEYS)}

#: What :func:`dedupe`'s pass gives each row: an array of these (column
#: :data:`_PASS` once exploded).  ``kind``: 0 the first row of its resource in the
#: partition (a candidate), 1 refused, 4 a counter of the partition (on its last row, one element
#: per counter; duplicates and blank lines give no element); ``fp``: the CLI's 64-bit
#: fingerprint of the key (signed), or for a counter its index in :data:`_COUNTS`;
#: ``count``: a counter's value; ``part``: a counter's partition.
_ELEMENT_FIELDS = [
    ("kind", T.ByteType(), pa.int8()), ("fp", T.LongType(), pa.int64()),
    ("rungs", T.IntegerType(), pa.int32()), ("key", T.StringType(), pa.string()),
    ("out", T.StringType(), pa.string()), ("error", T.StringType(), pa.string()),
    ("count", T.LongType(), pa.int64()), ("part", T.IntegerType(), pa.int32()),
]
_PASS_SCHEMA = T.ArrayType(T.StructType(
    [T.StructField(name, spark_type) for name, spark_type, _ in _ELEMENT_FIELDS]))
_ELEMENT_ARROW = pa.struct([(name, arrow_type) for name, _, arrow_type in _ELEMENT_FIELDS])
#: The counters of one partition, in this order (``fp`` of a counter element), then
#: the per-rung counts of its duplicates (``by_rung``, RUNG_KEYS order), then the
#: rungs of its candidates (``simple`` for a mask of 0).
_COUNTS = ("lines", "blank", "unparseable", "candidates", "duplicates")
_CANDIDATE, _REJECT, _COUNTER = 0, 1, 4
#: The column of the pass's element in :attr:`SparkDedupe.classified`.
_PASS = "iri_pass"
#: What a null value is (the CLI has none): refused.
_NULL: tuple[Outcome | None, str, tuple[Any, ...], str] = (
    Outcome.REJECT, "null value: not a URL", (), "")


def _udf(fn: Any, return_type: T.DataType) -> Any:
    # The type hints of fn say which Arrow UDF: pa.Array -> pa.Array, or iterators.
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


@dataclass(frozen=True)
class _Query:
    """The opt-in query heuristics (:func:`iri_scrapy.core.query.rewrite_query`)."""

    drop_query_params: tuple[str, ...] = ()
    sort_query: bool = False


def _deduper(level: Level, keep_fragment: bool, nfc: bool, form: Form | None,
             with_rungs: bool, query: _Query) -> Deduper:
    return Deduper(level, keep_fragment=keep_fragment, nfc=nfc, canonical=form is not None,
                   form=form or "uri", rung_stats=with_rungs,
                   drop_query_params=query.drop_query_params, sort_query=query.sort_query)


def _classifier(level: Level, keep_fragment: bool, nfc: bool, form: Form | None,
                with_rungs: bool, query: _Query) -> Any:
    """The per-batch function of :func:`classify`: ``Deduper.classify`` of each value."""

    def run(values: pa.Array) -> pa.Array:
        d = _deduper(level, keep_fragment, nfc, form, with_rungs, query)
        decide = d.classify
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
                outcome, text, found, written = decide(_text(value))
                if outcome is None:
                    key = text
                    out = written if form is not None else None
                    if with_rungs:
                        mask = 0
                        for rung in found:
                            mask |= _MASK[rung]
                elif outcome is Outcome.BLANK:
                    blank = True
                else:
                    error = text
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
    drop_query_params: Iterable[str] = (),
    sort_query: bool = False,
) -> Column:
    """A struct column (:data:`CLASSIFY_SCHEMA`) for a string or binary column of URLs.

    Binary values are read as the CLI reads a line (UTF-8, undecodable bytes
    refused with their column); ``keep_fragment`` defaults to False, the
    retrieval key (RFC 3987 section 5.1), as in ``iri-scrapy dedupe``.
    *drop_query_params* (name globs) and *sort_query* are the opt-in query
    heuristics of :class:`~iri_scrapy.store.dedupe.Deduper` (not RFC 3987).
    """
    fn = _classifier(Level.coerce(level), keep_fragment, nfc, form, with_rungs,
                     _Query(tuple(drop_query_params), sort_query))
    return _udf(fn, CLASSIFY_SCHEMA)(_col(col))


def retrieval_key(
    col: "Column | str",
    level: Level | int | str = Level.SCHEME,
    *,
    form: Form = "uri",
    keep_fragment: bool = False,
    nfc: bool = False,
    drop_query_params: Iterable[str] = (),
    sort_query: bool = False,
) -> Column:
    """``normalize(value, level, form=form, keep_fragment=..., nfc=...)`` of each value,
    null when the value is blank, null, refused or has no canonical form (use
    :func:`classify` for the reason).  With *drop_query_params* (name globs) or
    *sort_query*, the canonical URI rewritten by
    :func:`~iri_scrapy.core.query.rewrite_query`, then written in *form*
    (as ``iri-scrapy normalize --drop-query-param/--sort-query``)."""
    lvl = Level.coerce(level)
    drop = tuple(drop_query_params)

    def run(values: pa.Array) -> pa.Array:
        out: list[str | None] = []
        for value in _values(values):
            if value is None:
                out.append(None)
                continue
            try:
                if drop or sort_query:
                    uri = normalize(_text(value), lvl, keep_fragment=keep_fragment, nfc=nfc)
                    out.append(written_form(rewrite_query(uri, drop, sort_query), lvl, form))
                else:
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


def _dedupe_pass(level: Level, keep_fragment: bool, nfc: bool, form: Form | None,
                 with_rungs: bool, first_wins: bool, with_keys: bool = True,
                 query: _Query = _Query()) -> Any:
    """The one Python pass of :func:`dedupe` over a partition (an iterator Arrow UDF).

    With *first_wins* (the order increases along the partition) a per-partition
    :class:`Deduper` keeps the first row of each fingerprint and counts the others
    as duplicates, by rung as the CLI counts them; otherwise every URL is a
    candidate.  Each row gets an array (:data:`_PASS_SCHEMA`): empty for a
    duplicate or a blank line, so that only candidates and refused rows leave the
    pass.  The output is held back one batch so that the partition's counters ride
    on its last row, one element each.  Without *with_keys* the ``key`` of a
    candidate is null (its fingerprint decides; the key string is not moved).
    """
    n_rungs = len(RUNG_KEYS)

    def run(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        d = _deduper(level, keep_fragment, nfc, form, with_rungs, query)
        stats = d.stats
        cand_rungs = [0] * n_rungs
        held: tuple[pa.Array, pa.StructArray] | None = None
        for values in batches:
            batch = _PassBatch(d, cand_rungs, first_wins, with_keys, form).run(values)
            if held is not None:
                yield _pass_array(*held, [], 0)
            held = batch
        if held is None:
            return
        ctx = TaskContext.get()
        counts = [stats.lines, stats.blank, stats.unparseable, stats.unique, stats.duplicates]
        counts += [stats.by_rung[k] for k in RUNG_KEYS] + cand_rungs
        yield _pass_array(*held, counts, ctx.partitionId() if ctx is not None else 0)

    return run


def _block(values: pa.Array) -> bytes:
    """The lines the batch loop reads for a batch of values: each value a line, read as
    the CLI reads one (a final CR dropped: so for a binary value, as :func:`_text`); a
    value that cannot be one line so (null, holding a LF, a string ending in CR before
    the LF) is an empty line, which the loop leaves to the reference."""
    import pyarrow.compute as pc

    binary = pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)
    if not binary:
        values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type)
                             else pa.binary())
    empty = pa.scalar(b"", values.type)
    block = _joined(pc.fill_null(values, empty) if values.null_count else values)
    if block.count(b"\n") == len(values) - 1 and (binary or b"\r\n" not in block):
        return block  # the common case: no value but a null is out of place
    misfit = pc.or_kleene(pc.is_null(values), pc.match_substring(values, "\n"))
    if not binary:
        misfit = pc.or_kleene(misfit, pc.ends_with(values, "\r"))
    return _joined(pc.if_else(pc.fill_null(misfit, True), empty, values))


def _joined(values: pa.Array) -> bytes:
    """The values joined by LF (in C)."""
    import pyarrow.compute as pc

    one = pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)
    joined: bytes = pc.binary_join(one, b"\n")[0].as_py()
    return joined


@cache
def _record_masks() -> pa.Array:
    """The Spark pass's rungs mask (bits of :data:`_MASK`) of each rungs byte of a record
    of the batch loop (bit k: ``dedupe_batch.rung_keys()[k + 1]``)."""
    keys = dedupe_batch.rung_keys()[1:]
    return pa.array([sum(_MASK[k] for i, k in enumerate(keys) if bits >> i & 1)
                     for bits in range(1 << len(keys))], pa.int32())


class _PassBatch:
    """One Arrow batch of :func:`_dedupe_pass`: the batch loop of ``iri-scrapy dedupe``
    (:func:`iri_scrapy.store.dedupe_batch.records`) answers its lines, each line it
    leaves is classified by the reference (:meth:`Deduper.classify`, then
    :meth:`Deduper.add`), as the CLI's streaming path does; counted into the
    :class:`Deduper`'s statistics and *cand_rungs* (the rungs of the candidates).

    Each row leaves a byte in each of the per-row streams (``counts``: its element
    count, 0 or 1; ``kinds``; ``missed``: 1 for a row the reference classified), and 8
    in ``fps``; the loop's records give those of its rows, and the fields of the
    classified rows (fingerprint, rungs, key, written form, error) are put in place at
    the end (``replace_with_mask``): no Python object per answered row."""

    def __init__(self, d: Deduper, cand_rungs: list[int], first_wins: bool,
                 with_keys: bool, form: Form | None) -> None:
        self.d, self.cand_rungs, self.first_wins = d, cand_rungs, first_wins
        self.with_keys, self.form = with_keys, form
        self.write_key = with_keys or form is not None
        self.index = {k: RUNG_KEYS.index(k) for k in dedupe_batch.rung_keys()}
        self.streams: dict[str, list[bytes]] = {
            k: [] for k in ("fps", "rungs", "counts", "kinds", "missed", "keys")}
        self.rows = 0
        # The classified rows' fields: fingerprint, rungs mask, key, written form, error.
        self.classified: list[list[Any]] = [[] for _ in range(5)]

    def run(self, values: pa.Array) -> tuple[pa.Array, pa.StructArray]:
        """Per row its element count (int32), and the elements in row order."""
        d = self.d
        d.stats.lines += len(values)
        if len(values) and dedupe_batch.ready(d):
            for answered in dedupe_batch.records(d, _block(values), self.write_key):
                self._answered(answered)
                if answered.miss:
                    self._classify(values[self.rows].as_py())
        else:
            for value in values.to_pylist():
                self._classify(value)
        return self._arrays()

    def _answered(self, a: dedupe_batch.Answered) -> None:
        k = len(a.added)
        if not k:
            return
        self.rows += k
        streams = self.streams
        streams["fps"].append(a.fps)
        streams["rungs"].append(a.rungs)
        streams["counts"].append(a.added if self.first_wins else b"\x01" * k)
        zeros = bytes(k)
        streams["kinds"].append(zeros)
        streams["missed"].append(zeros)
        streams["keys"].append(a.keys)
        if self.first_wins:
            dedupe_batch.count(self.d, a.first, a.duplicates, a.first_rungs, a.duplicate_rungs)
            candidates = a.first_rungs
        else:
            self.d.stats.unique += a.first + a.duplicates
            candidates = tuple(x + y for x, y in zip(a.first_rungs, a.duplicate_rungs,
                                                      strict=True))
        if self.d.rung_stats:
            for key, n in zip(dedupe_batch.rung_keys(), candidates, strict=True):
                self.cand_rungs[self.index[key]] += n

    def _classify(self, value: Any) -> None:
        """A row the loop left, by the reference."""
        d, stats = self.d, self.d.stats
        self.rows += 1
        outcome, text, found, written = (
            d.classify(value) if value.__class__ is str
            else _NULL if value is None else d.classify(_text(value)))
        count, kind = 0, _CANDIDATE
        fields: list[Any] = [None] * 5
        if outcome is None:
            fp = fingerprint(text)
            if not self.first_wins:
                stats.unique += 1
            if not self.first_wins or d.add(fp, found):
                count = 1
                mask = 0
                for rung in found:
                    mask |= _MASK[rung]
                if d.rung_stats and not mask:
                    self.cand_rungs[0] += 1
                elif d.rung_stats:
                    for i in range(1, len(RUNG_KEYS)):
                        self.cand_rungs[i] += mask >> i & 1
                fields = [fp - (1 << 64) if fp >> 63 else fp, mask if d.rung_stats else None,
                          text, written, None]
        elif outcome is Outcome.BLANK:
            stats.blank += 1
        else:
            stats.unparseable += 1
            count, kind = 1, _REJECT
            fields[4] = text
        streams = self.streams
        streams["fps"].append(bytes(8))
        streams["rungs"].append(b"\x00")
        streams["counts"].append(b"\x01" if count else b"\x00")
        streams["kinds"].append(b"\x01" if kind else b"\x00")
        streams["missed"].append(b"\x01")
        if self.write_key:
            streams["keys"].append(b"\n")
        for column, item in zip(self.classified, fields, strict=True):
            column.append(item)

    def _arrays(self) -> tuple[pa.Array, pa.StructArray]:
        import pyarrow.compute as pc

        n = self.rows
        joined = {k: pa.py_buffer(b"".join(v)) for k, v in self.streams.items()}
        counts = pa.Array.from_buffers(pa.uint8(), n, [None, joined["counts"]])
        fps = pa.Array.from_buffers(pa.int64(), n, [None, joined["fps"]])
        rungs = (pc.take(_record_masks(), pa.Array.from_buffers(
            pa.uint8(), n, [None, joined["rungs"]])) if self.d.rung_stats
            else pa.nulls(n, pa.int32()))
        keys = (pc.split_pattern(pa.array([joined["keys"].to_pybytes()[:-1]]), pattern=b"\n")
                .flatten().cast(pa.string()) if self.write_key and n
                else pa.nulls(n, pa.string()))
        columns = [fps, rungs, keys, keys, pa.nulls(n, pa.string())]
        types = [pa.int64(), pa.int32(), pa.string(), pa.string(), pa.string()]
        if self.classified[0]:
            missed = pa.Array.from_buffers(pa.uint8(), n, [None, joined["missed"]]).cast(
                pa.bool_())
            columns = [pc.replace_with_mask(c, missed, pa.array(m, t))
                       for c, m, t in zip(columns, self.classified, types, strict=True)]
        if not self.with_keys:
            columns[2] = pa.nulls(n, pa.string())
        if self.form is None:
            columns[3] = pa.nulls(n, pa.string())
        kinds = pa.Array.from_buffers(pa.int8(), n, [None, joined["kinds"]])
        has = pc.not_equal(counts, 0)
        fields = [c.filter(has) for c in (kinds, *columns)]
        m = len(fields[0])
        elements = pa.StructArray.from_arrays(
            [*fields, pa.nulls(m, pa.int64()), pa.nulls(m, pa.int32())],
            fields=list(_ELEMENT_ARROW))
        return counts.cast(pa.int32()), elements


def _pass_array(counts: pa.Array, elements: pa.StructArray, counters: list[int],
                part: int) -> pa.Array:
    """The pass's arrays for one batch (elements per row, the elements); *counters*
    become elements of its last row."""
    import pyarrow.compute as pc

    k = len(counters)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(counts)])
    if k:
        offsets = pa.concat_arrays([offsets[:-1], pa.array(
            [offsets[-1].as_py() + k], pa.int32())])
        extra = pa.StructArray.from_arrays(
            [pa.array([_COUNTER] * k, pa.int8()), pa.array(range(k), pa.int64()),
             pa.nulls(k, pa.int32()), pa.nulls(k, pa.string()), pa.nulls(k, pa.string()),
             pa.nulls(k, pa.string()), pa.array(counters, pa.int64()),
             pa.array([part] * k, pa.int32())], fields=list(_ELEMENT_ARROW))
        elements = pa.concat_arrays([elements, extra])
    return pa.ListArray.from_arrays(offsets, elements)


@dataclass
class SparkDedupe:
    """What :func:`dedupe` returns; the DataFrames are lazy, :meth:`stats` runs jobs.

    ``unique``: the rows of the first spelling of each resource, with columns
    ``iri_key`` (canonical URI) and ``iri_out`` (the value in *form* when
    ``canonical`` was asked, else null) added.  ``rejects``: the refused rows
    with ``iri_error``.  ``classified``: what leaves the Python pass (the
    candidates, the refused rows, and each partition's counters as extra copies of
    its last row; the pass's element in struct column ``iri_pass``), which all
    three read: :meth:`persist` it to pass once.  ``groups``: one row per resource
    (``iri_fp``, struct ``first``).  ``groups``, ``unique`` and ``rejects`` are
    built when first read (a job that only asks for :meth:`stats` does not pay
    for their plans).
    """

    classified: DataFrame
    columns: list[str]
    order_by: str
    col: str
    level: Level
    rung_stats: bool
    unique_order: bool

    @cached_property
    def groups(self) -> DataFrame:
        iri = F.col(_PASS)
        rest = [c for c in self.columns if c not in (self.order_by, self.col)]
        return self.classified.where(iri["kind"] == _CANDIDATE).groupBy(
            iri["fp"].alias("iri_fp")).agg(F.min(F.struct(
                F.col(self.order_by), F.col(self.col), *[F.col(c) for c in rest],
                iri["key"].alias("iri_key"), iri["out"].alias("iri_out"))).alias("first"))

    @cached_property
    def unique(self) -> DataFrame:
        first = F.col("first")
        return self.groups.select(*[first[c].alias(c) for c in self.columns],
                                  first["iri_key"].alias("iri_key"),
                                  first["iri_out"].alias("iri_out"))

    @cached_property
    def rejects(self) -> DataFrame:
        return self.classified.where(F.col(_PASS)["kind"] == _REJECT).select(
            *self.columns, F.col(_PASS)["error"].alias("iri_error"))

    def partition_lines(self) -> dict[int, int]:
        """``{partition: lines}`` of the pass (a small job; cheap when persisted)."""
        iri = F.col(_PASS)
        rows = self.classified.where(
            (iri["kind"] == _COUNTER) & (iri["fp"] == _COUNTS.index("lines"))).select(
            iri["part"], iri["count"]).collect()
        return {int(r[0]): int(r[1]) for r in rows}

    def persist(self) -> "SparkDedupe":
        """Cache :attr:`classified` (the Python pass then runs once)."""
        self.classified.persist()
        return self

    def unpersist(self) -> None:
        self.classified.unpersist()

    def stats(self, max_rejects: int = 20) -> DedupeStats:
        """The counters of the run, as ``iri-scrapy dedupe`` reports them (one job; a
        second one lists the rejects, when there are some).

        ``rejects`` lists the first *max_rejects* refused rows by the order
        column; their ``line`` is the order column's value (the CLI orders by
        line number).
        """
        n = len(RUNG_KEYS)
        base = len(_COUNTS)
        iri = F.col(_PASS)
        order = F.col(self.order_by)
        # The rungs of each resource's first row: by the order alone when it has no
        # ties (a hash aggregation, no sort), else ties broken by the value.
        first_mask = (F.min_by(iri["rungs"], order) if self.unique_order
                      else F.min(F.struct(order, F.col(self.col),
                                          iri["rungs"].alias("m")))["m"])
        # One hash aggregation on (kind, fp): a resource per candidate fingerprint,
        # a counter per index (summed over the partitions); then ~20 rows.
        per_fp = self.classified.where(iri["kind"] != _REJECT).groupBy(
            iri["kind"].alias("kind"), iri["fp"].alias("fp")).agg(
            first_mask.alias("m"), F.sum(iri["count"]).alias("s"))
        first = F.col("m")
        aggs = [F.count(F.lit(1)).alias("n"), F.sum("s").alias("s")]
        if self.rung_stats:
            aggs.append(F.count(F.when(first == 0, 1)).alias("r_simple"))
            aggs.extend(F.count(F.when(first.bitwiseAND(_BIT[k]) != 0, 1)).alias(f"r_{k}")
                        for k in RUNG_KEYS[1:])
        rows = per_fp.groupBy(F.when(F.col("kind") == _COUNTER, F.col("fp")).alias("i")).agg(
            *aggs).collect()
        total = [0] * (base + 2 * n)
        row: dict[str, Any] = {}
        for r in rows:
            if r["i"] is None:
                row = r.asDict()
            else:
                total[int(r["i"])] = int(r["s"] or 0)
        valid = total[3] + total[4]
        unique = int(row.get("n") or 0)
        stats = DedupeStats(lines=total[0], unique=unique, duplicates=valid - unique,
                            blank=total[1], unparseable=total[2])
        if self.rung_stats:
            for i, k in enumerate(RUNG_KEYS):
                stats.first_by_rung[k] = int(row.get(f"r_{k}") or 0)  # first spellings
                stats.by_rung[k] = (total[base + i] + total[base + n + i]
                                    - stats.first_by_rung[k])
        if stats.unparseable and max_rejects:
            first_rejects = (self.rejects.select(self.order_by, "iri_error")
                             .orderBy(self.order_by).limit(max_rejects).collect())
            stats.rejects = [Reject(int(r[0]), r[1]) for r in first_rejects]
        return stats


def dedupe(
    df: DataFrame,
    col: str,
    level: Level | int | str = Level.SCHEME,
    *,
    order_by: str | None = None,
    ordered_partitions: bool | None = None,
    unique_order: bool | None = None,
    keep_fragment: bool = False,
    nfc: bool = False,
    canonical: bool = False,
    form: Form = "uri",
    rung_stats: bool = True,
    keys: bool = True,
    drop_query_params: Iterable[str] = (),
    sort_query: bool = False,
) -> SparkDedupe:
    """Keep the first spelling of each distinct resource of column *col* of *df*.

    Two values are the same resource when the 64-bit fingerprints of their
    canonical URIs at *level* are equal, as in :class:`iri_scrapy.store.dedupe.Deduper`
    (the local CLI); "first" is the smallest *order_by* value (ties broken by the
    value itself), so the result does not depend on partitioning.  Without
    *order_by* a ``monotonically_increasing_id`` is used: the order of the input's
    partitions, which for one text file is the order of its lines.
    *ordered_partitions* (default: true without *order_by*) says that *order_by*
    increases strictly along each partition (as such an id does): each partition's
    duplicates are then dropped in the Python pass, before the shuffle;
    *unique_order* (default: true without *order_by*) that no two rows share an
    *order_by* value (the report's aggregation then needs no sort).  Rows that are
    not URLs, or have no canonical form, go to ``rejects`` with their error message;
    blank rows are counted and dropped.  Duplicates are counted per rung of the
    ladder that changed their spelling (``simple`` when already canonical), like
    the local CLI.  ``keys=False`` leaves ``iri_key`` null: the canonical key of
    each first spelling is then not moved from the Python workers to the JVM
    (``iri-scrapy dedupe --spark`` writes the lines or ``iri_out``, never the key).
    *drop_query_params* (name globs) and *sort_query* are the opt-in query
    heuristics, as in the local CLI (not RFC 3987).
    """
    lvl = Level.coerce(level)
    x = df
    if order_by is None:
        order_by = "iri_order"
        x = x.withColumn(order_by, F.monotonically_increasing_id())
        ordered_partitions = True if ordered_partitions is None else ordered_partitions
        unique_order = True if unique_order is None else unique_order
    fn = _dedupe_pass(lvl, keep_fragment, nfc, form if canonical else None, rung_stats,
                      bool(ordered_partitions), keys,
                      _Query(tuple(drop_query_params), sort_query))
    # The pass's array per row, exploded: duplicates and blank lines leave no row.
    classified = x.select("*", F.explode(_udf(fn, _PASS_SCHEMA).asNondeterministic()(
        F.col(col))).alias(_PASS))
    columns = [*df.columns, *([order_by] if order_by not in df.columns else [])]
    return SparkDedupe(classified, columns, order_by, col, lvl, rung_stats, bool(unique_order))
