"""The report page: a dedupe run or a finished crawl as one self-contained web page.

One HTML file with inline CSS and inline SVG, no script, no font or image to
fetch: it opens offline in any browser and can be mailed or attached to a ticket.
:func:`render_dedupe` (``iri-scrapy dedupe --report``) shows the totals, the URL
lines by rung of the ladder (RFC 3987 section 5.3) as a bar chart (duplicates
and first spellings stacked), the hosts with most duplicate spellings, sample
alias clusters and the first refused lines, from
:class:`iri_scrapy.store.dedupe.DedupeStats` and its bounded
:class:`iri_scrapy.store.dedupe.Samples`.  :func:`render_crawl` (``iri-scrapy
report JOBDIR``, ``IRI_REPORT_FILE``) shows a crawl's
:class:`iri_scrapy.store.crawl_report.CrawlReport` with the same parts: the
duplicates by deciding rung (those stock Scrapy would have fetched stacked
apart), the hosts with most aliases, sample clusters.  Each cluster's spellings
are explained against its first (:func:`iri_scrapy.core.explain.explain`), each
distinct account once.  The page's size does not grow with the input: at most
:data:`~iri_scrapy.store.dedupe.MAX_CLUSTERS` clusters of
:data:`~iri_scrapy.store.dedupe.MAX_CLUSTER_SPELLINGS` spellings, each account cut
to :data:`ACCOUNT_LINES` lines of :data:`ACCOUNT_LINE_CHARS` characters, the page
saying what it left out and how to see it.  Every text from the input is
HTML-escaped, and characters that would not show (controls, format characters
such as bidi controls, zero-width characters, the soft hyphen and tag characters,
white space other than U+0020, default-ignorable characters; RFC 3987 section 4.1)
are shown as marked escapes, so that two URLs that differ by one look different.
It lives in ``store/`` because the CLI and the plugin both render it.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime, timezone

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.explain import explain
from iri_scrapy.core.hosts import host_to_unicode
from iri_scrapy.core.ladder import Level, NormalizeOptions, Rung, normalize
from iri_scrapy.core.shorten import shorten
from iri_scrapy.store.crawl_report import DECIDED_KEYS, PROTOCOL_SKIPPED, CrawlReport
from iri_scrapy.store.dedupe import (
    FRAGMENT,
    FRAGMENT_LABEL,
    MAX_CLUSTER_SPELLINGS,
    MAX_CLUSTERS,
    DedupeStats,
    Samples,
)

#: Characters a page must not show as themselves, for two URLs that differ only by them
#: would look the same: controls (Cc), format characters (Cf: bidi controls, zero-width
#: characters, soft hyphen, byte order mark, tag characters), line and paragraph
#: separators and white space other than U+0020 (Zl, Zp, Zs), surrogates (a byte that
#: was not UTF-8, Cs), and the other Default_Ignorable_Code_Point characters of Unicode
#: (DerivedCoreProperties: Hangul fillers, variation selectors, ...).
_HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp", "Zs"))
_IGNORABLE_RANGES = ((0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
                     (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
                     (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
                     (0xE0000, 0xE0FFF))
_CANDIDATE = re.compile("[^\x21-\x7e]")

#: An explain account on the page: at most this many lines, each shortened to this many
#: characters (:func:`~iri_scrapy.core.shorten.shorten`), so that the page's size is
#: bounded whatever the report holds.
ACCOUNT_LINES = 12
ACCOUNT_LINE_CHARS = 320

_DUP, _FIRST, _STOCK = "#d9534f", "#7aa6d6", "#f0b5b3"

_CSS = """
:root { --ink:#1d2430; --muted:#5b6676; --line:#dde3ea; --dup:#d9534f; --first:#7aa6d6;
        --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); margin: 0; background: var(--bg); }
main { max-width: 1040px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 18px; margin: 32px 0 10px; }
.sub { color: var(--muted); margin: 0 0 20px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.card .n { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums; }
.card .l { color: var(--muted); font-size: 13px; }
.card.dup .n { color: var(--dup); }
section.panel { background: #fff; border: 1px solid var(--line); border-radius: 8px;
                padding: 14px 16px; }
table { border-collapse: collapse; width: 100%; }
td, th { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { height: 10px; background: var(--dup); border-radius: 3px; min-width: 2px; }
code, pre { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 12px; }
.cluster { border-top: 1px solid var(--line); padding-top: 10px; margin-top: 10px; }
.cluster:first-of-type { border-top: 0; margin-top: 0; }
.key { font-weight: 600; word-break: break-all; }
ul.spellings { margin: 4px 0 6px; padding-left: 20px; word-break: break-all; }
.legend span { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
               vertical-align: -1px; margin: 0 4px 0 12px; }
.note { color: var(--muted); font-size: 13px; }
.esc { background: #fff3bf; color: #8a4b00; border: 1px solid #e0b252; border-radius: 3px;
       padding: 0 2px; font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
footer { color: var(--muted); font-size: 12px; margin-top: 36px; }
"""

#: Chart labels of the dupefilter's deciding rungs that are not ladder rungs.
_OTHER_LABELS = {
    FRAGMENT: FRAGMENT_LABEL,
    "heuristics": ("", "query heuristics (not RFC)"),
}


def _hidden(char: str) -> bool:
    """Whether *char* is shown as an escape (see :data:`_HIDDEN_CATEGORIES`)."""
    if char == " ":
        return False
    if unicodedata.category(char) in _HIDDEN_CATEGORIES:
        return True
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in _IGNORABLE_RANGES)


def _escape(char: str) -> str:
    """``\\x85``, ``\\u200b``, ``\\U000e0041``, as the terminal shows them; a byte that
    was not UTF-8 (a surrogate escape) as ``\\xNN``."""
    cp = ord(char)
    if 0xDC80 <= cp <= 0xDCFF:
        return f"\\x{cp - 0xDC00:02x}"
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _marked(match: re.Match[str]) -> str:
    char = match.group()
    if not _hidden(char):
        return html.escape(char, quote=True)
    cp = ord(char)
    what = (f"byte 0x{cp - 0xDC00:02X} that is not UTF-8" if 0xDC80 <= cp <= 0xDCFF
            else f"U+{cp:04X} {unicodedata.name(char, '') or 'control'}")
    return f"<span class='esc' title='{what}'>{_escape(char)}</span>"


def _text(value: str, markup: bool = True) -> str:
    """*value* for the page, HTML-escaped: a character that would not show (a control,
    a format character such as a bidi control or U+200B, other white space than
    U+0020, a default-ignorable character, a byte that was not UTF-8) is shown as its
    escape, marked (*markup*: a highlighted span naming it; else the plain escape, for
    the page's title), so that two URLs that differ only by it look different."""
    if not markup:
        return html.escape("".join(_escape(c) if _hidden(c) else c for c in value), quote=True)
    out, at = [], 0
    for m in _CANDIDATE.finditer(value):
        out.append(html.escape(value[at:m.start()], quote=True))
        out.append(_marked(m))
        at = m.end()
    out.append(html.escape(value[at:], quote=True))
    return "".join(out)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _share(part: int, whole: int) -> str:
    return f"{part / max(whole, 1):.1%}"


def _cards(cards: Sequence[tuple[str, int, str, bool]]) -> str:
    """``(id, number, label, highlighted)`` as a row of cards."""
    return "<div class='cards'>" + "".join(
        f"<div class='card{' dup' if hot else ''}' id='total-{key}'><div class='n'>{n:,}</div>"
        f"<div class='l'>{label}</div></div>" for key, n, label, hot in cards) + "</div>"


_NARROW, _HALF, _WIDE = frozenset(" .,:;'!|il"), frozenset("()-/[]fjrt"), frozenset("mwMW")


def _text_width(text: str, size: float) -> float:
    """A generous estimate of *text*'s width in pixels at font *size*: per character,
    as wide as in DejaVu Sans (the widest common sans-serif, the fallback of
    ``system-ui`` on Linux) or wider; a character that is not ASCII as 1 em.  No
    script runs on the page, so the chart makes room from this alone."""
    em = 0.0
    for char in text:
        if not char.isascii():
            em += 1.0
        elif char in _NARROW:
            em += 0.36
        elif char in _HALF:
            em += 0.46
        elif char in _WIDE:
            em += 0.98
        else:
            em += 0.78 if char.isupper() else 0.66
    return em * size


def _chart(rows: Sequence[tuple[str, str, Sequence[int]]], series: Sequence[tuple[str, str]],
           aria: str) -> str:
    """A horizontal stacked bar chart (inline SVG): ``(id, label, values)`` per row, one
    value per ``(colour, what)`` of *series*."""
    top = max([sum(values) for _, _, values in rows] + [1])
    # Room for the longest label (left) and the longest figures (right of a full bar).
    label_w = int(max([_text_width(label, 14) for _, label, _ in rows] + [0])) + 16
    figures_w = int(max([_text_width(" + ".join(f"{n:,}" for n in values), 13)
                         for _, _, values in rows] + [0])) + 16
    bar_w, row_h = 520, 30
    height = row_h * len(rows) + 10
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='100%' "
           f"viewBox='0 0 {label_w + bar_w + figures_w} {height}' "
           f"aria-label='{html.escape(aria)}'>"]
    for i, (key, label, values) in enumerate(rows):
        y = 5 + i * row_h
        x = float(label_w)
        bars = []
        for (colour, what), n in zip(series, values, strict=True):
            w = bar_w * n / top
            bars.append(f"<rect x='{x:.1f}' y='{y + 5}' width='{w:.1f}' height='18' rx='2' "
                        f"fill='{colour}'><title>{n:,} {html.escape(what)}</title></rect>")
            x += w
        figures = " + ".join(f"{n:,}" for n in values)
        out.append(
            f"<g id='rung-{html.escape(key)}'><text x='0' y='{y + 19}' font-size='14' "
            f"fill='#1d2430'>{html.escape(label)}</text>{''.join(bars)}"
            f"<text x='{x + 8:.1f}' y='{y + 19}' font-size='13' "
            f"fill='#5b6676'>{figures}</text></g>")
    out.append("</svg>")
    return "".join(out)


def _legend(series: Sequence[tuple[str, str]]) -> str:
    return "<span class='legend'>" + "".join(
        f"<span style='background:{colour}'></span>{html.escape(what)}"
        for colour, what in series) + "</span>"


def _hosts(rows: Sequence[tuple[str, Sequence[int]]], columns: Sequence[str], pruned: bool,
           none: str) -> str:
    """The hosts table: ``(host, counts)`` rows, the first count drawn as a bar."""
    if not rows:
        return f"<p class='note'>{none}</p>"
    most = max(rows[0][1][0], 1)
    out = []
    for host, counts in rows:
        shown = host_to_unicode(host) if host else "(no host)"
        label = _text(shown) + (f" <span class='note'>({_text(host)})</span>"
                                if shown != host else "")
        nums = "".join(f"<td class='num'>{n:,}</td>" for n in counts)
        out.append(f"<tr><td>{label}</td>{nums}<td style='width:45%'>"
                   f"<div class='bar' style='width:{100 * counts[0] / most:.1f}%'></div></td>"
                   "</tr>")
    note = ("<p class='note'>Past the first 4,096 hosts the smallest counters were dropped: "
            "the counts are lower bounds.</p>" if pruned else "")
    heads = "".join(f"<th class='num'>{c}</th>" for c in columns)
    return (f"<table id='hosts'><tr><th>host</th>{heads}<th></th></tr>" + "".join(out)
            + "</table>" + note)


def _account(first: str, other: str, level: str, keep_fragment: bool, nfc: bool) -> str:
    """The explain account of *other* against *first*, whole."""
    try:
        return str(explain(first, other, level, keep_fragment=keep_fragment, nfc=nfc))
    except IRIError as exc:
        return f"(no account: {exc})"


def _shown(account: str, level: str, keep_fragment: bool, nfc: bool) -> str:
    """*account* as the page shows it: each line shortened, at most
    :data:`ACCOUNT_LINES` lines; past them a line says what was cut and the command
    that shows it whole."""
    lines = account.split("\n")
    shown = [shorten(line, ACCOUNT_LINE_CHARS) for line in lines[:ACCOUNT_LINES]]
    cut = len(lines) - len(shown) + sum(a != b for a, b in zip(shown, lines, strict=False))
    if cut:
        options = f"--level {level}" + (" --keep-fragment" if keep_fragment else "") + (
            " --nfc" if nfc else "")
        shown.append(f"[{_plural(cut, 'line')} cut or shortened; the whole account: "
                     f"iri-scrapy explain {options} FIRST SPELLING, with the two spellings "
                     "as in the input]")
    return "\n".join(_text(line) for line in shown)


def _clusters(clusters: Sequence[tuple[str, Sequence[str], Sequence[str]]], level: str,
              keep_fragment: bool, nfc: bool) -> str:
    """``(key, spellings, notes)`` per cluster: the spellings (first first, each with its
    note) and each later one explained against the first, each distinct account once
    (naming the spellings it is for).  At most :data:`MAX_CLUSTERS` clusters of
    :data:`MAX_CLUSTER_SPELLINGS` spellings are shown (a report file read back may
    hold more): the page says how many were left out."""
    if not clusters:
        return "<p class='note'>No alias cluster sampled.</p>"
    out = []
    for key, all_spellings, all_notes in clusters[:MAX_CLUSTERS]:
        spellings = all_spellings[:MAX_CLUSTER_SPELLINGS]
        first = spellings[0]
        items = "".join(f"<li><code>{_text(shorten(s))}</code>"
                        + (f" <span class='note'>({_text(n)})</span>" if n else "") + "</li>"
                        for s, n in zip(spellings, all_notes, strict=False))
        if len(all_spellings) > len(spellings):
            hidden = _plural(len(all_spellings) - len(spellings), "more spelling")
            items += f"<li class='note'>{hidden} not shown</li>"
        accounts: dict[str, list[int]] = {}
        for n, other in enumerate(spellings[1:], 2):
            accounts.setdefault(_account(first, other, level, keep_fragment, nfc),
                                []).append(n)
        blocks = "".join(
            (f"<p class='note'>{_which(numbers, len(spellings))}:</p>"
             if len(accounts) > 1 or len(numbers) > 1 else "")
            + "<pre>" + _shown(account, level, keep_fragment, nfc) + "</pre>"
            for account, numbers in accounts.items())
        try:
            readable = normalize(key, form="iri")
        except IRIError:
            readable = key
        also = (f" <span class='note'>{_text(shorten(readable))}</span>"
                if readable != key else "")
        out.append(f"<div class='cluster'><div class='key'>{_text(shorten(key))}{also}</div>"
                   f"<ul class='spellings'>{items}</ul>{blocks}</div>")
    if len(clusters) > MAX_CLUSTERS:
        out.append(f"<p class='note'>{_plural(len(clusters) - MAX_CLUSTERS, 'more cluster')} "
                   "in the report not shown.</p>")
    return "".join(out)


def _which(numbers: Sequence[int], count: int) -> str:
    """``"spellings 2, 3 and 4 against the first"`` (numbered as listed)."""
    if len(numbers) == count - 1 and count > 2:
        return "every later spelling against the first (the same account)"
    if len(numbers) == 1:
        return f"spelling {numbers[0]} against the first"
    return ("spellings " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]} "
            "against the first (the same account)")


def _rejects(stats: DedupeStats) -> str:
    if not stats.unparseable:
        return ""
    rows = "".join(f"<tr><td class='num'>{r.line:,}</td><td>{_text(shorten(r.error))}</td></tr>"
                   for r in stats.rejects)
    return (f"<h2>Refused lines</h2><section class='panel'><p class='note'>The first "
            f"{len(stats.rejects):,} of {_plural(stats.unparseable, 'refused line')}; "
            "positions are 0-based character indices in the line.</p>"
            f"<table id='rejects'><tr><th class='num'>line</th><th>why</th></tr>{rows}"
            "</table></section>")


def _fragments(keep_fragment: bool) -> str:
    return "kept" if keep_fragment else "dropped (retrieval key, RFC 3987 section 5.1)"


def _page(title: str, sections: Sequence[str], version: str | None) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    by = f"iri-scrapy {html.escape(version)}" if version else "iri-scrapy"
    body = "".join(sections) + (f"<footer>{by}, {when}. One self-contained file: no script, "
                                "nothing fetched.</footer>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_text(title, markup=False)}</title><style>{_CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")


def render_dedupe(
    stats: DedupeStats,
    samples: Samples,
    *,
    source: str,
    level: str,
    keep_fragment: bool,
    nfc: bool,
    rungs: Sequence[Rung],
    elapsed: float,
    version: str | None = None,
) -> str:
    """The report page of a dedupe run, as one HTML document."""
    cards = [
        ("lines", stats.lines, "lines read", False),
        ("unique", stats.unique, "unique resources", False),
        ("duplicates", stats.duplicates,
         f"duplicates ({_share(stats.duplicates, stats.unique + stats.duplicates)} of the URLs)",
         True),
        ("blank", stats.blank, "blank lines", False),
        ("unparseable", stats.unparseable, "refused lines", False),
    ]
    series = [(_DUP, "duplicates"), (_FIRST, "first spellings")]
    labels = [(r.key, f"{r.section} " + ("simple: already canonical" if r is Rung.SIMPLE
                                         else r.title)) for r in rungs]
    if not keep_fragment:
        labels.append((FRAGMENT, " ".join(FRAGMENT_LABEL)))
    rows = [(key, label, (stats.by_rung[key], stats.first_by_rung[key]))
            for key, label in labels]
    clusters = [(key, spellings, ["first"] + [""] * (len(spellings) - 1))
                for key, spellings in samples.clusters.items()]
    title = f"Dedupe report: {source}"
    return _page(title, [
        f"<h1>{_text(title)}</h1>",
        f"<p class='sub'>level {html.escape(level)}, fragments {_fragments(keep_fragment)}, "
        f"nfc {'on' if nfc else 'off'}; {elapsed:.1f} s</p>",
        _cards(cards),
        "<h2>URL lines by rung of the ladder</h2><section class='panel'>"
        "<p class='note'>Each URL line counts under every rung (RFC 3987 section 5.3) that "
        "changed its spelling on the way to its canonical key, under <em>simple</em> if "
        "none did, and under <em>fragment</em> (section 5.1) when its fragment was dropped: "
        "from the key alone, whichever spelling came first."
        + _legend(series) + "</p>"
        + _chart(rows, series, "URL lines by rung of the ladder") + "</section>",
        "<h2>Hosts with most aliases</h2><section class='panel'>"
        + _hosts([(h, (n,)) for h, n in samples.top_hosts()], ["duplicate spellings"],
                 samples.hosts_pruned, "No duplicates.") + "</section>",
        f"<h2>Sample alias clusters</h2><section class='panel'><p class='note'>Up to "
        f"{len(samples.clusters) or 'a few'} resources met under several spellings (found "
        "among recent first spellings), each spelling explained against the first.</p>"
        + _clusters(clusters, level, keep_fragment, nfc) + "</section>",
        _rejects(stats),
    ], version)


def _decided_rows(report: CrawlReport) -> list[tuple[str, str, tuple[int, int]]]:
    """The chart's rows: the ladder's rungs up to the crawl's level, then ``fragment``
    (when fragments are dropped), then any other rung the file counts."""
    try:
        rungs = NormalizeOptions(Level.coerce(report.level), nfc=report.nfc).rungs
    except ValueError:
        rungs = ()
    keys = ["simple", *(r.key for r in rungs)]
    if not report.keep_fragment:
        keys.append("fragment")
    keys += [k for k in DECIDED_KEYS if k not in keys and report.decided_by.get(k)]
    keys += sorted(k for k in report.decided_by if k not in keys)
    titles = {r.key: (r.section, r.title) for r in Rung}
    titles["simple"] = ("5.3.1", "simple: the same spelling again")
    titles.update(_OTHER_LABELS)
    rows = []
    for key in keys:
        section, title = titles.get(key, ("", key))
        total, stock = report.decided_by.get(key, 0), report.stock_by.get(key, 0)
        rows.append((key, f"{section} {title}".strip(), (stock, total - stock)))
    return rows


def _skipped(report: CrawlReport) -> str:
    """At level protocol: the requests rules merged just before download, not above."""
    n = sum(report.crawl_stats.get(k, 0) for k in PROTOCOL_SKIPPED)
    if not n:
        return ""
    return (f" Besides these, learned rules merged {_plural(n, 'request')} with a page "
            "already served just before download (they had passed the dupefilter before "
            "the rule was known: <code>iri/protocol/skipped_at_download</code>, "
            "<code>iri/protocol/alias-first</code>).")


def render_crawl(report: CrawlReport, *, source: str, version: str | None = None) -> str:
    """The report page of a finished crawl (``iri_report.json``), as one HTML document."""
    stats = report.crawl_stats
    dups = report.duplicates
    cards = [
        ("requests", report.requests, "requests met by the dupefilter", False),
        ("duplicates", dups, f"duplicates dropped ({_share(dups, report.requests)})", False),
        ("stock_aliases", report.stock_aliases,
         "more fetches stock Scrapy's fingerprint would have made", True),
        ("responses", stats.get("downloader/response_count", 0), "responses", False),
        ("items", stats.get("item_scraped_count", 0), "items scraped", False),
    ]
    series = [(_DUP, "one more fetch for stock Scrapy's fingerprint"),
              (_STOCK, "no more fetch for stock Scrapy either")]
    clusters = []
    for cluster in report.clusters.values():
        spellings = [cluster.first] + [a.spelling for a in cluster.aliases]
        first_note = "first spelling" if cluster.first_known else "canonical key"
        notes = [first_note] + [
            f"decided by {a.decided_by}" + ("; stock Scrapy would fetch it" if a.stock_alias
                                           else "") for a in cluster.aliases]
        clusters.append((cluster.key, spellings, notes))
    how = (f"finish reason {report.finish_reason}" if report.finish_reason
           else "not closed (written while the crawl ran)")
    if report.runs > 1:
        how = f"covers the job's {report.runs} runs (JOBDIR resumed), the last: " + how
    if report.elapsed_seconds:
        how += f", {report.elapsed_seconds:,.1f} s"
    if report.finished:
        how += f", closed {report.finished}"
    title = f"Crawl report: {report.spider or 'spider'}"
    protocol = (" At level protocol the accounts below use no learned rules (the crawl's "
                "are not kept): a spelling the rules merged shows as not equivalent."
                if report.level == "protocol" else "")
    return _page(title, [
        f"<h1>{_text(title)}</h1>",
        f"<p class='sub'>{_text(source)}: {_text(how)}; level {_text(report.level)}, "
        f"fragments {_fragments(report.keep_fragment)}, nfc {'on' if report.nfc else 'off'}"
        "</p>",
        _cards(cards),
        "<h2>Duplicates by deciding rung</h2><section class='panel'>"
        "<p class='note'>Each request the dupefilter dropped counts once, under the rung "
        "(RFC 3987 section 5.3) that made it equal to the first spelling of its resource "
        "(<code>iri/dupefilter/decided_by/&lt;rung&gt;</code>); <em>simple</em>: the same "
        "spelling again, a repeated link." + _skipped(report) + _legend(series) + "</p>"
        + _chart(_decided_rows(report), series, "Duplicates by deciding rung") + "</section>",
        "<h2>Hosts with most aliases</h2><section class='panel'>"
        + _hosts([(h, (a, s)) for h, a, s in report.top_hosts()],
                 ["aliases", "stock Scrapy would fetch"], report.hosts_pruned,
                 "No alias: every duplicate was the same spelling again.") + "</section>",
        f"<h2>Sample alias clusters</h2><section class='panel'><p class='note'>Up to "
        f"{len(clusters) or 'a few'} resources met under several spellings, each later "
        "spelling explained against the first (a first spelling that was already canonical "
        f"is not kept: its key stands for it).{protocol}</p>"
        + _clusters(clusters, report.level, report.keep_fragment, report.nfc) + "</section>",
    ], version)
