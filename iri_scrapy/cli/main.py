"""The ``iri-scrapy`` command line (also ``python -m iri_scrapy``).

A thin layer over the core: argument parsing, files and streams, messages and
exit codes.  The logic lives in :mod:`iri_scrapy.core.ladder` (normalize),
:mod:`iri_scrapy.core.explain`, :mod:`iri_scrapy.store.dedupe` and :mod:`iri_scrapy.core.bidi`.

Exit codes: 0 success; 1 "not equivalent" (explain), "problems found" (check),
some input could not be normalized (normalize: a URL argument or a line of
stdin, whatever ``--on-error`` writes for it, each reported on stderr) or some
lines were refused (dedupe); 2 usage errors, unreadable files and, for explain,
an input that cannot be normalized; 130 on Ctrl-C; 141 when the reader of the
output went away (broken pipe), quietly.

Refusals name the line (or argument) and what is wrong: a byte that is not
UTF-8 reads "invalid UTF-8 byte 0xC9 at index 2".  Input that is not text is
never written back.  A UTF-8 byte order mark at the start of a file or stdin is
skipped, as the ``utf-8-sig`` codec does.  Every position in every
message is a 0-based character index into the text as given (an undecodable
byte counts as one character), as in the library's errors (``IRIError.index``).
URLs quoted in messages are shortened past :data:`~iri_scrapy.core.shorten.SHOWN_LENGTH`
characters (:func:`~iri_scrapy.core.shorten.shorten`).

Fragments: every command compares and writes the *retrieval* key by default,
without the fragment ("when IRIs are compared to select (or avoid) a network
action ... fragment components (if any) should be excluded", RFC 3987 section
5.1), since this is a crawl tool; ``--keep-fragment`` keeps them, which is the
library's default.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any, BinaryIO

from iri_scrapy.core.bidi import check as check_iri
from iri_scrapy.core.charclasses import BIDI_FORMATTING
from iri_scrapy.core.errors import IRIError, IRIScrapyError
from iri_scrapy.core.explain import explain as explain_iris
from iri_scrapy.core.extras import install_hint
from iri_scrapy.core.ladder import Level, NormalizeOptions, Rung, normalize
from iri_scrapy.core.query import rewrite_query
from iri_scrapy.store import dedupe_batch
from iri_scrapy.store.dedupe import (
    FRAGMENT,
    FRAGMENT_LABEL,
    Deduper,
    DedupeStats,
    Outcome,
    Samples,
    not_text,
    undecodable_byte,
    written_form,
)

PROG = "iri-scrapy"
EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
#: dedupe reports its memory per unique URL only from this many unique URLs on.
MEMORY_REPORT_MIN_UNIQUE = 10_000
#: What dedupe's fingerprint table costs (the README says the same).
MEMORY_FIGURE = (
    "12 bytes per distinct URL, 12 at the peak while a segment of the table grows, "
    "measured with tracemalloc on 1,000,000 distinct URLs (11 to 17 at other sizes from "
    "10,000 on, as the table's 4096 segments grow one at a time)"
)

_EXIT_CODES = """\
exit status:
  0  success
  1  {one}
  2  usage error, unreadable input or unwritable output{two}
"""

# --- text helpers -------------------------------------------------------------------

_ESCAPES = {cp: f"\\u{cp:04x}" for cp in map(ord, BIDI_FORMATTING)}
_ESCAPES.update({cp: f"\\x{cp:02x}" for cp in list(range(0x20)) + list(range(0x7F, 0xA0))})
_ESCAPES.update({cp: f"\\x{cp - 0xDC00:02x}" for cp in range(0xDC80, 0xDD00)})


def display(text: str) -> str:
    """*text* safe for a terminal: bidi formatting characters, controls and undecodable
    bytes (surrogate escapes) are shown as escapes, so a message cannot reorder or
    hide what it reports (RFC 3987 section 4.1)."""
    text = text.translate(_ESCAPES)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _decode(raw: bytes) -> str:
    """One input line as text without its end of line; bytes that are not UTF-8 are kept
    as surrogate escapes (so they reach the core, which rejects them, and are written
    back byte for byte)."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
    return raw.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape") + b"\n"


class _Error(IRIScrapyError):
    """A usage or I/O error: message for stderr, exit status 2."""


def _err(msg: str) -> None:
    sys.stderr.write(f"{PROG}: {display(msg)}\n")


def _open_in(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise _Error(f"cannot read {path}: {exc.strerror or exc}") from None


def _open_out(path: str | None) -> BinaryIO:
    if path is None or path == "-":
        sys.stdout.flush()
        return sys.stdout.buffer
    try:
        return open(path, "wb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise _Error(f"cannot write {path}: {exc.strerror or exc}") from None


def _close(stream: IO[Any]) -> None:
    if stream in (sys.stdin.buffer, sys.stdout.buffer):
        if stream is sys.stdout.buffer:
            stream.flush()
        return
    stream.close()


def _same_file(a: str, b: str | None) -> bool:
    if a == "-" or b is None or b == "-":
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


_BOM = b"\xef\xbb\xbf"


def _raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of *stream* as read, without the UTF-8 byte order mark that some editors
    put at the start of a file (skipped as Python's ``utf-8-sig`` codec does)."""
    lines = iter(stream)
    for first in lines:
        yield first[len(_BOM):] if first.startswith(_BOM) else first
        break
    yield from lines


def _lines(stream: BinaryIO) -> Iterator[str]:
    for raw in _raw_lines(stream):
        yield _decode(raw)


# --- options --------------------------------------------------------------------------

_LEVELS = [level.name.lower() for level in Level]


def _ladder_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("comparison ladder (RFC 3987 section 5.3)")
    g.add_argument(
        "--level",
        choices=_LEVELS,
        default="scheme",
        help="highest rung: simple (5.3.1), syntax (5.3.2), scheme (5.3.3, default), "
        "protocol (5.3.4; without learned rules it adds nothing)",
    )
    g.add_argument(
        "--keep-fragment",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep '#fragment' (default: dropped, the retrieval key of RFC 3987 "
        "section 5.1, as a crawler fetches)",
    )
    g.add_argument(
        "--nfc",
        action="store_true",
        help="also apply character normalization to NFC (section 5.3.2.2; off by default)",
    )
    return p


def _query_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group(
        "query heuristics (not RFC 3987: they may merge different resources; the "
        "plugin's IRI_DROP_QUERY_PARAMS and IRI_SORT_QUERY)")
    g.add_argument(
        "--drop-query-param",
        dest="drop_query_params",
        action="append",
        default=[],
        metavar="GLOB",
        help="drop the query parameters whose name matches GLOB (shell-style: 'utm_*', "
        "'?', '[seq]'; case-sensitive), every occurrence; repeat for more",
    )
    g.add_argument(
        "--sort-query",
        action="store_true",
        help="sort the query's name=value pairs (code point order)",
    )
    return p


def _form_option(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument(
        "--form",
        choices=["uri", "iri", "surt"],
        default="uri",
        help="write URIs (ASCII, %%-encoded UTF-8, A-label hosts: RFC 3987 section 3.1), "
        "IRIs (readable Unicode: section 3.2) or SURT keys (the canonical URI, host "
        f"reversed: com,example)/a){note}; default: %(default)s",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``iri-scrapy`` and its commands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="RFC 3987 IRI canonicalization for crawl URLs: normalize, explain, "
        "dedupe a frontier, check for bidi and homograph problems, report on a crawl.",
        epilog="Run 'iri-scrapy COMMAND --help' for the options of a command.",
        formatter_class=fmt,
    )
    from iri_scrapy.version import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    ladder = _ladder_options()
    query = _query_options()
    _add_normalize(sub, ladder, query)
    _add_explain(sub, ladder)
    _add_dedupe(sub, ladder, query)
    _add_check(sub)
    _add_report(sub)
    _add_frontier(sub)
    return parser


def _add_normalize(
    sub: Any,
    ladder: argparse.ArgumentParser,
    query: argparse.ArgumentParser,
) -> None:
    """The ``normalize`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "normalize",
        parents=[ladder, query],
        formatter_class=fmt,
        help="print the canonical form of each URL",
        description="Print the canonical form of each URL (RFC 3987 section 5.3), one a "
        "line, in input order.  Without URL arguments (or with '-') the lines of standard "
        "input are read; blank lines stay blank.  A line that cannot be normalized is "
        "reported on standard error with its line number (a byte that is not UTF-8: "
        "'invalid UTF-8 byte 0xC9 at index N', N the 0-based character index in the "
        "line, as every position in messages) and, by default, written unchanged so "
        "the output stays aligned with the input (--on-error); a line that is not text "
        "(a byte that is not UTF-8, a control character such as NUL inside it, as dedupe "
        "refuses) is written as an empty line instead, never echoed.  A UTF-8 byte order "
        "mark at the start of the input is skipped.",
        epilog=_EXIT_CODES.format(
            one="some input could not be normalized (each reported on stderr, with any "
            "--on-error)", two=""),
    )
    p.add_argument("urls", nargs="*", metavar="URL", help="URLs or IRIs; '-' reads stdin")
    _form_option(p)
    p.add_argument(
        "--on-error",
        choices=["keep", "empty", "skip"],
        default="keep",
        help="what to write for a line that fails: the input unchanged (default; an "
        "empty line for one that is not text), an empty line, or nothing; it is reported "
        "on stderr in every case",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    p.set_defaults(func=cmd_normalize)


def _add_explain(sub: Any, ladder: argparse.ArgumentParser) -> None:
    """The ``explain`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "explain",
        parents=[ladder],
        formatter_class=fmt,
        help="show rung by rung whether two URLs are the same resource",
        description="Climb the comparison ladder of RFC 3987 section 5.3 with A and B and "
        "print both after each rung, the rung that made them equal, or the component "
        "and character where they still differ.",
        epilog=_EXIT_CODES.format(
            one="not equivalent at the level", two=", or an input that cannot be normalized"
        ),
    )
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.set_defaults(func=cmd_explain)


def _add_dedupe(
    sub: Any,
    ladder: argparse.ArgumentParser,
    query: argparse.ArgumentParser,
) -> None:
    """The ``dedupe`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "dedupe",
        parents=[ladder, query],
        formatter_class=fmt,
        help="keep the first spelling of each distinct resource of a URL list",
        description="Read a frontier dump (one URL a line, any size) and write the first "
        "spelling of each distinct resource, in input order, streaming.  Memory grows "
        "with the number of distinct resources only: one 8-byte fingerprint (BLAKE2b of "
        "the canonical key) each, in a flat open-addressing table, never the lines: "
        f"{MEMORY_FIGURE}.  Blank lines are dropped and counted.  Lines "
        "that are not URLs are refused: a byte that is not UTF-8 ('invalid UTF-8 byte "
        "0xC9 at index N'), a control character inside the line (C0 including tab, DEL, "
        "C1; the white space around a line is ignored), no scheme (a relative "
        "reference); so are lines that cannot be normalized.  Refused lines are never "
        "dropped silently: they are counted, listed with their line numbers in the "
        "closing report on stderr, and written to --rejects.  Positions ('index N') are "
        "0-based character indices in the line (an undecodable byte counts as one), as "
        "in the library's errors.",
        epilog=_EXIT_CODES.format(one="some lines were refused (not URLs, or could not be "
                                  "normalized)", two="")
        + "\nThe closing report (stderr) gives lines read, unique, duplicates, the URL "
        "lines per rung of\nthe ladder (every line, first spelling or duplicate, counts "
        "under each rung that changed\nits spelling on the way to its canonical key, "
        "'simple' if none did, and under 'fragment' (5.1) when\nits fragment was "
        "dropped, as the crawl report heads them: so the counts do not\ndepend on which "
        "spelling came first),\nblank and unparseable (refused) lines, "
        f"and from {MEMORY_REPORT_MIN_UNIQUE:,} unique\nURLs on the fingerprint table's "
        "size.  Standard output carries only the URLs.",
    )
    p.add_argument("input", nargs="?", default="-", metavar="FILE",
                   help="input file, '-' (default) for stdin")
    p.add_argument("-o", "--output", metavar="OUT", help="output file, '-' (default) for stdout")
    p.add_argument(
        "--canonical",
        action="store_true",
        help="write the canonical form instead of the first spelling as given",
    )
    _form_option(p, " with --canonical")
    p.add_argument("--rejects", metavar="FILE", help="write the refused lines, as given")
    p.add_argument("--json-report", metavar="FILE", help="write the closing report as JSON "
                   "('-' for stdout only when -o is a file)")
    p.add_argument("--report", metavar="FILE.html", help="write the report as one "
                   "self-contained web page (no script, nothing fetched): totals, URL lines "
                   "by rung as a chart, the hosts with most aliases, sample alias clusters "
                   "with their explain account; bounded memory")
    p.add_argument("--max-listed", type=int, default=20, metavar="N",
                   help="list the first N unparseable lines in the report (default: 20)")
    p.add_argument("--no-rung-stats", dest="rung_stats", action="store_false",
                   help="skip the per-rung count of duplicates (faster)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress line on stderr (default: when stderr is a terminal); "
                   "with a FILE (or stdin redirected from one) it shows the percentage "
                   "read and the time left")
    p.add_argument("-q", "--quiet", action="store_true", help="no closing report on stderr")
    p.add_argument("--spark", nargs="?", const="local[*]", default=None, metavar="MASTER",
                   help=f"run the job on Apache Spark ({install_hint('spark')}; Java "
                   "17+) at MASTER (default local[*]); FILE is then a text file, directory "
                   "or glob, or Parquet (FILE ending in .parquet, or --column); -o OUT "
                   "ending in .parquet writes a Parquet directory; same report")
    p.add_argument("--column", metavar="NAME", help="with --spark: the Parquet column of the "
                   "URLs (default: url, uri, iri or the first string column)")
    p.set_defaults(func=cmd_dedupe)


def _add_check(sub: Any) -> None:
    """The ``check`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "check",
        formatter_class=fmt,
        help="flag bidi, IDN, homograph and syntax problems",
        description="Check each URL for: bidi formatting characters (RFC 3987 section "
        "4.1); components mixing right-to-left and left-to-right text, or with "
        "right-to-left text that does not start and end with it (section 4.2; components "
        "are userinfo, host labels, path segments, query names and values, fragment); "
        "host labels that fail IDNA (UTS 46) or are invalid A-labels; host labels that mix "
        "scripts (Latin with Cyrillic...: homograph risk); host labels written in one "
        "other script whose letters all read as ASCII (xn--80ak6aa92e, Cyrillic 'аррӏе' "
        "for 'apple': a whole-script homograph, UTS 39 section 4, as browsers check; not "
        "under a TLD of that script, e.g. .ru or .рф); and the RFC 3987 section 2.2 "
        "grammar (validate).  One line per finding, 'component: message U+XXXX at index "
        "N [kind]', or 'ok'.  With several URLs each line starts with the URL and a tab.  "
        "Without URL arguments (or with '-') the lines of stdin are checked.",
        epilog=_EXIT_CODES.format(one="problems found", two=""),
    )
    p.add_argument("urls", nargs="*", metavar="URL")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per URL: {url, ok, findings: [...]}")
    p.set_defaults(func=cmd_check)


def _add_report(sub: Any) -> None:
    """The ``report`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "report",
        formatter_class=fmt,
        help="a finished crawl's report as one self-contained web page",
        description="Render the iri_report.json that a crawl with the add-on and JOBDIR "
        "writes into its JOBDIR when it closes (or that file itself) as the page of "
        "'dedupe --report': the requests the dupefilter met, the duplicates it dropped by "
        "the rung of RFC 3987 section 5.3 that decided them (and those stock Scrapy's "
        "fingerprint would have fetched again), the hosts with most aliases, sample alias "
        "clusters with their explain account.  One HTML file, no script, nothing fetched.  "
        "The JSON is read as data, every field checked: a file that is not such a report "
        "is refused in one line.",
        epilog="exit status:\n  0  the page was written\n  2  usage error, no readable "
        "iri_report.json, a file that is not a crawl report, or unwritable output\n",
    )
    p.add_argument("jobdir", metavar="JOBDIR", help="the crawl's JOBDIR, or its iri_report.json")
    p.add_argument("-o", "--output", metavar="FILE.html", required=True,
                   help="the page to write ('-' for stdout)")
    p.set_defaults(func=cmd_report)


def _add_frontier(sub: Any) -> None:
    """The ``frontier`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "frontier",
        formatter_class=fmt,
        help="repair the crash-safe frontier store of a JOBDIR",
        description="Work on the frontier store of a JOBDIR (<JOBDIR>/iri_frontier.sqlite3).",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser(
        "salvage",
        formatter_class=fmt,
        help="copy every readable record of a damaged store into a new one",
        description="Copy every pending request, seen fingerprint and refused record that "
        "SQLite can still read out of a damaged or truncated frontier store into a new "
        "store, and say how many ids could not be read.  The damaged file is only read "
        "(from a copy).  In place (default): the JOBDIR must be writable and no crawl may "
        "use it; the new store takes the old one's name and the damaged file is kept as "
        "iri_frontier.sqlite3.damaged-<time>.  With --out DIR (a read-only JOBDIR): the new "
        "store is DIR/iri_frontier.sqlite3; point JOBDIR at DIR.  Then run the crawl again: "
        "the saved pending requests are fetched, the saved fingerprints are not fetched "
        "again.  In place, a store that is readable and whole (SQLite's quick_check finds "
        "nothing wrong, its meta table names its options and a format a crawl reads) is "
        "left untouched, and the command says so in one line (exit status 0).",
        epilog=_EXIT_CODES.format(
            one="salvaged, but some ids could not be read (their requests are lost: the "
            "pages that link to them are not fetched again)",
            two=", or nothing could be salvaged"),
    )
    p.add_argument("jobdir", metavar="JOBDIR")
    p.add_argument("--out", metavar="DIR", help="write the new store into DIR instead")
    p.set_defaults(func=cmd_frontier_salvage)


# --- commands -------------------------------------------------------------------------


def _inputs(urls: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for each URL argument, or each line of stdin for none or ``-``."""
    if not urls:
        urls = ["-"]
    for n, url in enumerate(urls, 1):
        if url == "-":
            for i, line in enumerate(_lines(sys.stdin.buffer), 1):
                yield f"line {i}", line
        else:
            yield f"argument {n}", url


def _normalized(text: str, args: argparse.Namespace) -> str:
    """*text* normalized as ``normalize`` asks; with a query heuristic, the canonical
    URI rewritten (:func:`~iri_scrapy.core.query.rewrite_query`), then written in
    ``--form`` (as ``dedupe`` writes its keys)."""
    if not (args.drop_query_params or args.sort_query):
        return normalize(text, args.level, form=args.form, keep_fragment=args.keep_fragment,
                         nfc=args.nfc)
    level = Level.coerce(args.level)
    uri = normalize(text, level, keep_fragment=args.keep_fragment, nfc=args.nfc)
    return written_form(rewrite_query(uri, args.drop_query_params, args.sort_query),
                        level, args.form)


def cmd_normalize(args: argparse.Namespace) -> int:
    """``iri-scrapy normalize``."""
    out = _open_out(args.output)
    interactive = out.isatty() if hasattr(out, "isatty") else False
    failed = 0
    try:
        for where, text in _inputs(args.urls):
            if not text.strip(" \t\r\n"):
                out.write(b"\n")
                continue
            # A line that is not text (a byte that is not UTF-8, a control character
            # such as NUL) is never written back: "keep" writes it as an empty line.
            error = not_text(text)
            kept = "" if error is not None else text
            if error is None:
                try:
                    result = _normalized(text, args)
                except IRIError as exc:
                    error = str(exc)
            if error is not None:
                failed += 1
                _err(f"normalize: {where}: {error}")
                if args.on_error == "skip":
                    continue
                result = kept if args.on_error == "keep" else ""
            out.write(_encode(result))
            if interactive:
                out.flush()
    finally:
        _close(out)
    if failed:
        _err(f"normalize: {failed} input(s) could not be normalized")
    return EXIT_PROBLEM if failed else EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    """``iri-scrapy explain``."""
    for name, text in (("A", args.a), ("B", args.b)):
        error = undecodable_byte(text)
        if error is not None:
            raise _Error(f"explain: {name}: {error}")
    try:
        result = explain_iris(args.a, args.b, args.level, keep_fragment=args.keep_fragment,
                              nfc=args.nfc)
    except IRIError as exc:
        raise _Error(f"explain: {exc}") from None
    sys.stdout.write("".join(display(line) + "\n" for line in str(result).split("\n")))
    return EXIT_OK if result.equivalent else EXIT_PROBLEM


def cmd_check(args: argparse.Namespace) -> int:
    """``iri-scrapy check``."""
    several = len(args.urls) != 1 or args.urls == ["-"]
    problems = 0
    for where, text in _inputs(args.urls):
        if where.startswith("line") and not text.strip(" \t\r\n"):
            continue
        findings = check_iri(text)
        problems += bool(findings)
        if args.json:
            doc = {"url": text, "ok": not findings, "findings": [f.to_dict() for f in findings]}
            sys.stdout.write(json.dumps(doc, ensure_ascii=True) + "\n")
            continue
        prefix = display(text) + "\t" if several else ""
        for f in findings:
            sys.stdout.write(prefix + display(str(f)) + "\n")
        if not findings:
            sys.stdout.write(prefix + "ok\n")
    sys.stdout.flush()
    return EXIT_PROBLEM if problems else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """``iri-scrapy report JOBDIR -o FILE.html`` (:mod:`iri_scrapy.cli.report`)."""
    from iri_scrapy.cli.report import crawl_report_path, render_crawl_page
    from iri_scrapy.store.crawl_report import FILENAME, CrawlReport, ReportError

    source = crawl_report_path(args.jobdir)
    if os.path.isdir(args.jobdir) and not os.path.exists(source):
        raise _Error(f"report: no {FILENAME} in {args.jobdir}: a crawl with the add-on "
                     "(iri_scrapy.Addon) and this JOBDIR writes it when it closes")
    if _same_file(source, args.output):
        raise _Error(f"report: {args.output} is the report file")
    try:
        report = CrawlReport.read(source)
    except ReportError as exc:
        raise _Error(f"report: {source}: {exc}") from None
    except OSError as exc:
        raise _Error(f"cannot read {source}: {exc.strerror or exc}") from None
    page = render_crawl_page(report, source=args.jobdir)
    out = _open_out(args.output)
    try:
        out.write(page.encode("utf-8"))
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        raise _Error(f"cannot write {args.output}: {exc.strerror or exc}") from None
    finally:
        _close(out)
    runs = "" if report.runs == 1 else f" over {report.runs:,} runs"
    _err(f"report: {report.requests:,} requests{runs}, "
         f"{_plural(report.duplicates, 'duplicate')} dropped; stock Scrapy's fingerprint "
         f"would have made {report.stock_aliases:,} more fetches"
         + ("" if args.output == "-" else f"; page written to {args.output}"))
    return EXIT_OK


def cmd_frontier_salvage(args: argparse.Namespace) -> int:
    """``iri-scrapy frontier salvage JOBDIR [--out DIR]`` (stdlib sqlite3 only)."""
    import sqlite3

    from iri_scrapy.store.frontier_file import SalvageError, salvage

    try:
        report = salvage(args.jobdir, args.out)
    except SalvageError as exc:
        raise _Error(str(exc)) from None
    except (OSError, sqlite3.Error) as exc:
        raise _Error(f"cannot salvage {args.jobdir}: {exc}") from None
    if report.whole:
        sys.stdout.write(f"{report.source} is readable and whole (SQLite quick_check ok, "
                         "its options and format in place): nothing to salvage, left "
                         "untouched\n")
        return EXIT_OK
    lines = [
        f"salvaged {report.source} into {report.target}",
        f"pending requests: {report.pending} saved, {report.pending_unreadable} ids unreadable",
        f"seen fingerprints: {report.seen} saved, {report.seen_unreadable} rows unreadable",
        f"refused records: {report.refused} kept",
    ]
    if report.kept_as is not None:
        lines.append(f"damaged store kept as {report.kept_as}")
    lines.extend(f"note: {note}" for note in report.notes)
    if report.lost:
        lines.append("some records could not be read: the pending requests among them are "
                     "lost (an unreadable id may also be one already answered)")
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return EXIT_PROBLEM if report.lost else EXIT_OK


def _input_size(stream: BinaryIO) -> tuple[int, int] | None:
    """``(start offset, size)`` of *stream* when it is a regular file (a FILE argument or
    stdin redirected from one), else None (a pipe or terminal: the size is unknown)."""
    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return stream.tell(), st.st_size
    except (OSError, ValueError, AttributeError):
        return None


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Progress:
    """A one-line progress display on stderr, redrawn at most 5 times a second.

    When the input is a regular file of known size, the line starts with the
    percentage of its bytes read, a bar and the time left (from the rate so far);
    otherwise it shows lines, rate and unique URLs only.  On a terminal the line
    is cut to its width, so that redrawing it never scrolls.
    """

    WIDTH = 20

    def __init__(self, enabled: bool, stream: BinaryIO | None = None) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.last = 0.0
        self.drawn = False
        self.stream = stream
        self.size = _input_size(stream) if enabled and stream is not None else None
        self.columns = 0  # no limit
        if enabled:
            try:
                if sys.stderr.isatty():
                    self.columns = os.get_terminal_size(sys.stderr.fileno()).columns - 1
            except (OSError, ValueError, AttributeError):
                pass

    def _position(self, behind: int = 0) -> int | None:
        if self.size is None or self.stream is None:
            return None
        try:
            return self.stream.tell() - behind - self.size[0]
        except (OSError, ValueError):
            self.size = None
            return None

    def line(self, lines: int, unique: int, now: float, behind: int = 0) -> str:
        """The progress line (without the carriage return); *behind*: bytes read but
        not yet counted in *lines* (a block)."""
        elapsed = max(now - self.start, 1e-9)
        text = f"{lines:,} lines  {lines / elapsed:,.0f} lines/s  {unique:,} unique"
        done = self._position(behind)
        if done is None or self.size is None:
            return text
        total = self.size[1] - self.size[0]
        if total <= 0:
            return text
        frac = min(max(done / total, 0.0), 1.0)
        filled = int(frac * self.WIDTH)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        left = _duration(elapsed * (1 - frac) / frac) if frac > 0 else "?"
        return f"{frac * 100:5.1f}% [{bar}] {left} left  {text}"

    def update(self, lines: int, unique: int, behind: int = 0) -> None:
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        line = self.line(lines, unique, now, behind)
        if self.columns > 0:
            line = line[: self.columns]
        sys.stderr.write(f"\r{line}\x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.drawn = False


def _plural(n: int, word: str) -> str:
    """``"1 duplicate"``, ``"2 duplicates"`` (thousands separated)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _rungs(args: argparse.Namespace) -> tuple[Rung, ...]:
    """The rungs a dedupe run climbs: simple, then those of its level."""
    return (Rung.SIMPLE, *NormalizeOptions(Level.coerce(args.level), nfc=args.nfc).rungs)


def _report(stats: DedupeStats, args: argparse.Namespace, elapsed: float) -> str:
    """The closing report of ``dedupe`` as text."""
    frag = "kept" if args.keep_fragment else "dropped (retrieval key, RFC 3987 section 5.1)"
    lines = [
        f"dedupe: {_plural(stats.lines, 'line')} read: {stats.unique:,} unique, "
        f"{_plural(stats.duplicates, 'duplicate')}, {stats.blank:,} blank, "
        f"{stats.unparseable:,} unparseable ({elapsed:.1f} s)",
        f"  level {args.level}, fragments {frag}, nfc {'on' if args.nfc else 'off'}",
    ]
    if args.drop_query_params or args.sort_query:
        drop = ", ".join(args.drop_query_params) or "none"
        lines.append(f"  query heuristics (not RFC 3987): parameters dropped {drop}, "
                     f"query sorted {'yes' if args.sort_query else 'no'}")
    if args.rung_stats and stats.duplicates:
        lines.append("  URL lines by rung (each line counts under every rung that changed its "
                     "spelling to reach its canonical key, whatever the order):")
        spellings = stats.spellings_by_rung()
        rows = [(rung.section, rung.title + (" (already canonical)" if rung is Rung.SIMPLE
                                             else ""), rung.key) for rung in _rungs(args)]
        if not args.keep_fragment:
            rows.append((*FRAGMENT_LABEL, FRAGMENT))
        for section, title, key in rows:
            lines.append(f"    {section:<8} {title:<46} {spellings[key]:>12,}")
    if stats.unparseable:
        where = f"; all written to {args.rejects}" if args.rejects else ""
        lines.append(f"  unparseable lines (first {len(stats.rejects)} of "
                     f"{stats.unparseable:,}{where}; positions are 0-based character "
                     "indices):")
        for r in stats.rejects:
            lines.append(f"    line {r.line}: {r.error}")
    if stats.unique >= MEMORY_REPORT_MIN_UNIQUE and stats.fingerprint_bytes:  # not --spark
        # Below this the table's fixed minimum (4,096 slots, 32 KiB) dominates.
        lines.append(
            f"  fingerprints: {stats.fingerprint_bytes / 2**20:.1f} MiB "
            f"({stats.fingerprint_bytes / stats.unique:.1f} bytes per unique URL; "
            f"peak {stats.peak_fingerprint_bytes / 2**20:.1f} MiB)"
        )
    return "\n".join(display(line) for line in lines) + "\n"


def _peak_rss_kib() -> int | None:
    """This process's peak resident set size in KiB (``VmHWM``), where Linux tells it.

    Read from /proc rather than getrusage(): after fork and exec, ru_maxrss keeps the
    parent's peak, VmHWM starts afresh with the new program.
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _dedupe_line(deduper: Deduper, raw: bytes, out: BinaryIO, rejects: BinaryIO | None) -> None:
    """One line as read (with its end of line) through the streaming path."""
    outcome, text = deduper.process(_decode(raw))
    if outcome is Outcome.UNIQUE:
        out.write(_encode(text))
    elif outcome is Outcome.REJECT and rejects is not None:
        rejects.write(raw if raw.endswith(b"\n") else raw + b"\n")


def _dedupe_lines(deduper: Deduper, src: BinaryIO, out: BinaryIO, rejects: BinaryIO | None,
                  progress: _Progress | None) -> None:
    """The streaming path: one line at a time through :meth:`Deduper.process`."""
    stats = deduper.stats
    for raw in _raw_lines(src):
        _dedupe_line(deduper, raw, out, rejects)
        if progress is not None and not stats.lines & 0x1FFF:
            progress.update(stats.lines, stats.unique)


def _dedupe_blocks(deduper: Deduper, src: BinaryIO, out: BinaryIO, rejects: BinaryIO | None,
                   progress: _Progress | None) -> None:
    """The batch path (:mod:`iri_scrapy.store.dedupe_batch`): blocks through the native
    loop, the lines it cannot answer through the streaming path; the same output."""
    def miss(raw: bytes) -> None:
        _dedupe_line(deduper, raw, out, rejects)

    stats = deduper.stats
    for block in dedupe_batch.blocks(src):
        if progress is not None and stats.lines:  # the lines before this block
            progress.update(stats.lines, stats.unique, behind=len(block))
        dedupe_batch.run(deduper, block, out.write, miss)


def cmd_dedupe(args: argparse.Namespace) -> int:
    """``iri-scrapy dedupe``."""
    if args.max_listed < 0:
        raise _Error("dedupe: --max-listed must be 0 or more")
    for other in (args.output, args.rejects, args.json_report):
        if _same_file(args.input, other):
            raise _Error(f"dedupe: {other} is the input file")
    if args.json_report == "-" and args.output in (None, "-"):
        raise _Error("dedupe: --json-report - needs -o FILE (stdout carries the URLs)")
    if args.report is not None and (args.report == "-" or _same_file(args.input, args.report)):
        raise _Error("dedupe: --report needs a FILE.html other than the input")
    if args.spark is not None:
        return _dedupe_spark(args)
    deduper = Deduper(
        args.level, keep_fragment=args.keep_fragment, nfc=args.nfc,
        canonical=args.canonical, form=args.form, max_rejects=args.max_listed,
        rung_stats=args.rung_stats, samples=args.report is not None,
        drop_query_params=args.drop_query_params, sort_query=args.sort_query,
    )
    show = sys.stderr.isatty() if args.progress is None else args.progress
    start = time.monotonic()
    src = _open_in(args.input)
    progress = _Progress(show, src)
    out: BinaryIO | None = None
    rejects: BinaryIO | None = None
    try:
        out = _open_out(args.output)
        rejects = open(args.rejects, "wb") if args.rejects else None  # noqa: SIM115
        if dedupe_batch.ready(deduper):
            _dedupe_blocks(deduper, src, out, rejects, progress if show else None)
        else:
            _dedupe_lines(deduper, src, out, rejects, progress if show else None)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        raise _Error(f"dedupe: {exc}") from None
    finally:
        progress.clear()
        _close(src)
        if rejects is not None:
            rejects.close()
        if out is not None:
            _close(out)
    elapsed = time.monotonic() - start
    stats = deduper.finish()
    if args.report is not None and deduper.samples is not None:
        _write_html_report(stats, deduper.samples, args, elapsed)
    return _finish_dedupe(stats, args, elapsed)


def _write_html_report(stats: DedupeStats, samples: Samples, args: argparse.Namespace,
                       elapsed: float) -> None:
    """``--report FILE.html``: :func:`iri_scrapy.cli.report.render`."""
    from iri_scrapy.cli.report import render

    page = render(stats, samples, source="stdin" if args.input == "-" else args.input,
                  level=args.level, keep_fragment=args.keep_fragment, nfc=args.nfc,
                  rungs=_rungs(args), elapsed=elapsed)
    try:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise _Error(f"cannot write {args.report}: {exc.strerror or exc}") from None


def _dedupe_spark(args: argparse.Namespace) -> int:
    """``iri-scrapy dedupe --spark [MASTER]``: the same job and report on Apache Spark."""
    try:
        from iri_scrapy.cli import dedupe_spark as spark_job
    except ImportError as exc:
        raise _Error(f"dedupe --spark needs pyspark ({install_hint('spark')}): "
                     f"{exc}") from None
    if not spark_job.is_master(args.spark) and args.input == "-":
        # "--spark FILE": argparse gave the file to the optional MASTER.
        args.input, args.spark = args.spark, "local[*]"
    if args.input == "-":
        raise _Error("dedupe --spark reads a FILE (text or Parquet), not stdin")
    start = time.monotonic()
    try:
        stats, samples = spark_job.cli_dedupe(args)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        raise _Error(f"dedupe: {exc}") from None
    except Exception as exc:  # Spark's errors (Py4J, AnalysisException): no traceback
        if exc.__class__.__module__.startswith(("pyspark", "py4j")):
            raise _Error(f"dedupe --spark: {str(exc).strip().splitlines()[0]}") from None
        raise
    elapsed = time.monotonic() - start
    if samples is not None:
        _write_html_report(stats, samples, args, elapsed)
    return _finish_dedupe(stats, args, elapsed)


def _finish_dedupe(stats: DedupeStats, args: argparse.Namespace, elapsed: float) -> int:
    if not args.quiet:
        sys.stderr.write(_report(stats, args, elapsed))
    if args.json_report:
        doc = stats.to_dict()
        doc.update(
            input=args.input, level=args.level, keep_fragment=args.keep_fragment,
            nfc=args.nfc, canonical=args.canonical, form=args.form,
            drop_query_params=args.drop_query_params, sort_query=args.sort_query,
            elapsed_seconds=round(elapsed, 3), peak_rss_kib=_peak_rss_kib(),
        )
        if args.spark is not None:
            doc.update(spark_master=args.spark)
        text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
        if args.json_report == "-":
            sys.stdout.write(text)
        else:
            try:
                with open(args.json_report, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                raise _Error(f"cannot write {args.json_report}: {exc.strerror or exc}") from None
    return EXIT_PROBLEM if stats.unparseable else EXIT_OK


# --- entry point ----------------------------------------------------------------------


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``iri-scrapy`` with *argv* (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        status: int = args.func(args)
        return status
    except _Error as exc:
        _err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
