"""iri_scrapy.integrations.spark on a real local Spark (local[2], Java 17+): the keys are
``normalize``'s row for row, and ``iri-scrapy dedupe --spark`` writes the same
lines, rejects and report as the local command.

Spark that cannot start is a failure, never a skip (the reason is in the message):
install the ``spark`` extra and a Java 17+ runtime (Debian: default-jre-headless).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy import IRIError, Level, normalize
from iri_scrapy.cli.main import main
from iri_scrapy.core.ladder import rungs_applied
from iri_scrapy.store.dedupe import RUNG_KEYS
from tests.support.generated_urls import lines as generated_lines
from tests.support.vectors import vector_inputs

pytestmark = pytest.mark.slow  # a real local Spark (its session alone takes ~10 s)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession

        import iri_scrapy.integrations.spark  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"pyspark is not installed (pip install -e '.[spark]'): {exc}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        session = (
            SparkSession.builder.master("local[2]").appName("iri_scrapy tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.adaptive.enabled", "true")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
    except Exception as exc:  # no Java, wrong Java, no port...
        pytest.fail(f"Spark (local[2]) could not start; it needs Java 17+: {exc}")
    yield session
    session.stop()


def _utf8(value: str) -> bool:
    """Whether a Spark string can hold *value*: a lone surrogate has no UTF-8 form (Spark
    would carry U+FFFD instead; bytes that are not UTF-8 are read as binary, below)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _corpus() -> list[str]:
    """Test strings: the test data's inputs, then generated lines of the three kinds."""
    lines = vector_inputs()
    for kind in ("crawl", "bait", "iris"):
        lines += generated_lines(kind, 400)
    return [v for v in lines if _utf8(v)]


def _expected(value: str, level: Level, form: Any, keep_fragment: bool) -> str | None:
    try:
        return normalize(value, level, form=form, keep_fragment=keep_fragment)
    except IRIError:
        return None


def test_keys_and_rungs_equal_the_core_row_for_row(spark: Any) -> None:
    from pyspark.sql import functions as F

    from iri_scrapy.integrations.spark import classify, retrieval_key, rungs

    values = _corpus()
    assert len(values) > 5000
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i long, v string")
    combos = [(Level.SCHEME, "uri", False), (Level.SYNTAX, "uri", True),
              (Level.SCHEME, "iri", True), (Level.SCHEME, "surt", False)]
    cols = [retrieval_key("v", lvl, form=form, keep_fragment=kf).alias(f"k{n}")
            for n, (lvl, form, kf) in enumerate(combos)]
    rows = df.select("i", *cols, rungs("v").alias("r"), classify("v").alias("c")).select(
        "i", *[f"k{n}" for n in range(len(combos))], "r", F.col("c")["error"].alias("e"),
        F.col("c")["blank"].alias("b")).collect()
    assert len(rows) == len(values)
    mismatches = []
    for row in rows:
        value = values[row["i"]]
        for n, (lvl, form, kf) in enumerate(combos):
            if row[f"k{n}"] != _expected(value, lvl, form, kf):
                mismatches.append((value, lvl, form, kf, row[f"k{n}"]))
        key = _expected(value, Level.SCHEME, "uri", False)
        if row["b"]:
            assert row["r"] is None and row["e"] is None and not value.strip(" \t\r\n")
        elif key is not None and row["e"] is None:
            # then "fragment" when the fragment was dropped (the dedupe report's 5.1 row)
            assert row["r"] == [r.key for r in rungs_applied(value, keep_fragment=False)] + (
                ["fragment"] if "#" in value else []), value
        elif row["e"] is not None:  # refused (a relative reference has a key, no scheme)
            assert row["r"] is None
    assert mismatches == []


def _lines_file(path: Path) -> list[bytes]:
    """A frontier dump with duplicates under every rung, blank and refused lines."""
    base = generated_lines("crawl", 300) + generated_lines("bait", 300) + generated_lines(
        "iris", 200)
    variants = [
        "HTTP://Example.COM:80/a/./b/%7euser", "http://example.com/a/b/~user",
        "http://résumé.example.org/rosé", "http://xn--rsum-bpad.example.org/ros%C3%A9",
        "http://example.com/a#frag", "http://example.com/a", "mailto:Joe@Example.COM",
        "http://example.com/a%2Fb", "http://example.com/a/b", "   ", "",
        "relative/path", "http://a:b/", "\ufeffhttp://bom.example/",
    ]
    out = [v.encode("utf-8", "surrogatepass") for v in base + variants + base[::7]]
    out += [b"http://ex\xc9ample.com/", b"http://tab.example/\tx", b"http://cr.example/\r"]
    return out


def _run(args: list[str], capsys: Any) -> tuple[int, str]:
    status = main(args)
    return status, capsys.readouterr().err


def test_cli_spark_writes_what_the_local_cli_writes(
        spark: Any, tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "frontier.txt"
    src.write_bytes(b"\n".join(_lines_file(tmp_path)) + b"\n")
    runs = {}
    for name, extra in (("local", []), ("spark", ["--spark", "local[2]"]),
                        ("split", ["--spark", "local[2]"])):
        out, rej, rep = (tmp_path / f"{name}.{ext}" for ext in ("out", "rej", "json"))
        # "split": about 16 partitions, so that resources and rejects span partitions
        spark.conf.set("spark.sql.files.maxPartitionBytes",
                       str(src.stat().st_size // 16) if name == "split" else "128m")
        status, err = _run(["dedupe", str(src), "-o", str(out), "--rejects", str(rej),
                            "--json-report", str(rep), "--max-listed", "50", *extra], capsys)
        report = json.loads(rep.read_text())
        for volatile in ("elapsed_seconds", "peak_rss_kib", "fingerprint_bytes",
                         "peak_fingerprint_bytes", "spark_master"):
            report.pop(volatile, None)
        text = "\n".join(line for line in err.splitlines() if line.startswith(("dedupe:", "  ")))
        text = text.split(" (")[0] + text[text.index("\n"):]  # without the elapsed time
        text = text.replace(str(rej), "REJECTS")
        runs[name] = (status, out.read_bytes(), rej.read_bytes(), report, text)
    local = runs["local"]
    assert local[3]["unparseable"] >= 5 and local[3]["duplicates"] > 100
    assert sum(local[3]["duplicates_by_rung"][k] for k in RUNG_KEYS if k != "simple") > 10
    for name in ("spark", "split"):
        on_spark = runs[name]
        assert on_spark[0] == local[0] == 1
        assert on_spark[1] == local[1]  # the unique lines, in input order, byte for byte
        assert on_spark[2] == local[2]  # the refused lines, as given
        assert on_spark[3] == local[3]  # counts, per-rung counts, listed rejects with lines
        assert on_spark[4] == local[4]  # the closing report's text


def test_cli_spark_canonical_iri_form_and_parquet(
        spark: Any, tmp_path: Path, capsys: Any) -> None:
    values = [v for v in generated_lines("iris", 150) if _utf8(v)]
    values += ["http://Ex.com:80/%7e", "http://ex.com/~", "x"]
    src = tmp_path / "in.parquet"
    spark.createDataFrame([(v,) for v in values], "url string").coalesce(1).write.parquet(
        str(src))
    txt = tmp_path / "in.txt"
    txt.write_text("\n".join(values) + "\n", encoding="utf-8")
    status, _ = _run(["dedupe", str(txt), "--canonical", "--form", "iri", "-o",
                      str(tmp_path / "local.out"), "-q"], capsys)
    assert status == 1
    status, _ = _run(["dedupe", "--spark", "local[2]", str(src), "--canonical", "--form",
                      "iri", "-o", str(tmp_path / "spark.parquet"), "-q"], capsys)
    assert status == 1
    got = spark.read.parquet(str(tmp_path / "spark.parquet")).orderBy("line").collect()
    expected = (tmp_path / "local.out").read_text(encoding="utf-8").splitlines()
    assert [r["url"] for r in got] == expected


def test_dedupe_dataframe_keeps_the_first_by_order_and_every_reject(spark: Any) -> None:
    from iri_scrapy.integrations.spark import dedupe

    rows = [(5, "http://example.com/~a"), (2, "HTTP://EXAMPLE.COM:80/%7ea"),
            (9, "http://example.com/%7Ea"), (3, "no scheme"), (7, "http://a:b/"),
            (1, "http://b.example/x#f"), (4, "http://b.example/x"), (8, " ")]
    df = spark.createDataFrame(rows, "n long, u string").repartition(2)
    job = dedupe(df, "u", order_by="n")
    unique = sorted((r["n"], r["u"], r["iri_key"]) for r in job.unique.collect())
    assert unique == [(1, "http://b.example/x#f", "http://b.example/x"),
                      (2, "HTTP://EXAMPLE.COM:80/%7ea", "http://example.com/~a")]
    rejects = sorted((r["n"], r["iri_error"]) for r in job.rejects.collect())
    assert [n for n, _ in rejects] == [3, 7]
    assert rejects[0][1] == "no scheme: not an absolute URL" and "port" in rejects[1][1]
    stats = job.stats()
    assert (stats.lines, stats.unique, stats.duplicates, stats.blank, stats.unparseable) == (
        8, 2, 3, 1, 2)
    assert stats.by_rung["simple"] == 2  # ~a and b.example/x were already canonical
    assert stats.by_rung["percent"] == 1  # %7Ea
    assert [r.line for r in stats.rejects] == [3, 7]
    # keys=False (what dedupe --spark runs): the same rows and report, no key moved.
    lean = dedupe(df, "u", order_by="n", keys=False)
    assert sorted((r["n"], r["u"], r["iri_key"]) for r in lean.unique.collect()) == [
        (n, u, None) for n, u, _ in unique]
    assert lean.stats() == stats


def test_the_query_heuristics_are_the_local_ones(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """``drop_query_params`` / ``sort_query`` (``--drop-query-param`` / ``--sort-query``):
    the keys of retrieval_key, classify and dedupe, and dedupe --spark's output, are the
    local CLI's (one function, :func:`iri_scrapy.core.query.rewrite_query`)."""
    from iri_scrapy.integrations.spark import classify, dedupe, retrieval_key
    from iri_scrapy.store.dedupe import Deduper

    values = ["http://a/?id=1&utm_source=x", "http://A/?utm_medium=y&id=1", "http://a/?b&a",
              "http://a/?a&b#f", "http://xn--bcher-kva.de/?z=%C3%A9&utm_q&a", "x"]
    drop = ("utm_*",)
    df = spark.createDataFrame(list(enumerate(values)), "n long, u string")
    rows = df.select("n", retrieval_key("u", drop_query_params=drop, sort_query=True).alias("k"),
                     retrieval_key("u", form="iri", drop_query_params=drop,
                                   sort_query=True).alias("i"),
                     classify("u", drop_query_params=drop, sort_query=True)["key"].alias("c")
                     ).orderBy("n").collect()
    local = Deduper(drop_query_params=drop, sort_query=True)
    keys = [local.classify(v)[1] if local.classify(v)[0] is None else None for v in values]
    assert [r["k"] for r in rows][:5] == [r["c"] for r in rows][:5] == keys[:5]
    assert keys[5] is None and rows[5]["c"] is None  # "x": refused by classify (no scheme)
    assert keys[:4] == ["http://a/?id=1", "http://a/?id=1", "http://a/?a&b", "http://a/?a&b"]
    assert rows[4]["i"] == "http://bücher.de/?a&z=é"
    job = dedupe(df, "u", order_by="n", drop_query_params=drop, sort_query=True)
    assert sorted(r["n"] for r in job.unique.collect()) == [0, 2, 4]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(values) + "\n", encoding="utf-8")
    outs = []
    for extra in ([], ["--spark", "local[2]"]):
        out = tmp_path / f"out{len(extra)}.txt"
        status, _ = _run(["dedupe", str(src), "-q", "--canonical", "--drop-query-param",
                          "utm_*", "--sort-query", "-o", str(out), *extra], capsys)
        assert status == 1  # "x" is refused
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == b"http://a/?id=1\nhttp://a/?a&b\nhttp://xn--bcher-kva.de/?a&z=%C3%A9\n"


def test_the_core_does_not_import_pyspark() -> None:
    code = ("import sys, iri_scrapy, iri_scrapy.cli.main, iri_scrapy.store.dedupe, iri_scrapy.core.surt; "
            "iri_scrapy.cli.main.build_parser(); "
            "assert 'pyspark' not in sys.modules and 'pandas' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_spark_report_is_the_local_report(spark: Any, tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "frontier.txt"
    src.write_bytes(b"\n".join(_lines_file(tmp_path)) + b"\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(src.stat().st_size // 4))
    pages = []
    for extra in ([], ["--spark", "local[2]"]):
        page = tmp_path / f"report{len(extra)}.html"
        status, _ = _run(["dedupe", str(src), "-o", str(tmp_path / "out"), "-q",
                          "--report", str(page), *extra], capsys)
        assert status == 1
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"nfc off; [\d.]+ s</p>", "nfc off</p>", text)  # the elapsed time
        pages.append(re.sub(r"<footer>.*</footer>", "", text))  # the time of day
    local, on_spark = pages
    assert "<div class='cluster'>" in local and "id='hosts'" in local
    assert on_spark == local


def test_cli_spark_skips_a_bom_on_the_first_line_as_the_local_cli(
        spark: Any, tmp_path: Path, capsys: Any) -> None:
    """A UTF-8 byte order mark before the first line (what some editors write) is not
    part of the URL on Spark either: the same unique lines, no line refused; plain
    and gzip-compressed, and in the first line's spelling written out."""
    import gzip

    spark.conf.set("spark.sql.files.maxPartitionBytes", "128m")
    data = "\ufeffhttp://Bom.example/%7ex\nhttp://bom.example/~x\nhttp://bom.example/y\n"
    plain, packed = tmp_path / "bom.txt", tmp_path / "bom.txt.gz"
    plain.write_bytes(data.encode("utf-8"))
    packed.write_bytes(gzip.compress(data.encode("utf-8")))
    local_out = tmp_path / "local.out"
    assert _run(["dedupe", str(plain), "-o", str(local_out), "-q"], capsys)[0] == 0
    assert local_out.read_bytes() == b"http://Bom.example/%7ex\nhttp://bom.example/y\n"
    for src in (plain, packed):
        out = tmp_path / f"{src.name}.spark.out"
        status, err = _run(["dedupe", str(src), "-o", str(out), "-q", "--spark", "local[2]"],
                           capsys)
        assert (status, out.read_bytes()) == (0, local_out.read_bytes()), err
