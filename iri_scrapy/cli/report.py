"""``iri-scrapy dedupe --report FILE.html``: the run as one self-contained web page.

One HTML file with inline CSS and inline SVG, no script, no font or image to
fetch: it opens offline in any browser and can be mailed or attached to a ticket.
It shows the totals, the URL lines by rung of the ladder (RFC 3987 section 5.3)
as a bar chart (duplicates and first spellings stacked), the hosts with most
duplicate spellings, sample alias clusters with the ``explain`` account of each
spelling against the first (:func:`iri_scrapy.core.explain.explain`), and the
first refused lines.  Everything comes from what the dedupe already counts
(:class:`iri_scrapy.store.dedupe.DedupeStats`) and its bounded
:class:`iri_scrapy.store.dedupe.Samples`: the page's size does not grow with the
input.  Every text from the input is HTML-escaped, and controls and bidi
formatting characters are shown as escapes (RFC 3987 section 4.1), as on the
terminal.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

from iri_scrapy.core.charclasses import BIDI_FORMATTING
from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.explain import explain
from iri_scrapy.core.hosts import host_to_unicode
from iri_scrapy.core.ladder import Rung, normalize
from iri_scrapy.core.shorten import shorten
from iri_scrapy.store.dedupe import DedupeStats, Samples

__all__ = ["render"]

_ESCAPES = {cp: f"\\u{cp:04x}" for cp in map(ord, BIDI_FORMATTING)}
_ESCAPES.update({cp: f"\\x{cp:02x}" for cp in list(range(0x20)) + list(range(0x7F, 0xA0))})
_ESCAPES.update({cp: f"\\x{cp - 0xDC00:02x}" for cp in range(0xDC80, 0xDD00)})

_CSS = """
:root { --ink:#1d2430; --muted:#5b6676; --line:#dde3ea; --dup:#d9534f; --first:#7aa6d6;
        --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); margin: 0; background: var(--bg); }
main { max-width: 1040px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
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
footer { color: var(--muted); font-size: 12px; margin-top: 36px; }
"""


def _text(value: str) -> str:
    """*value* for the page: controls, bidi formatting and undecodable bytes as escapes,
    then HTML-escaped."""
    shown = value.translate(_ESCAPES).encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(shown, quote=True)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _cards(stats: DedupeStats) -> str:
    share = f"{stats.duplicates / max(stats.unique + stats.duplicates, 1):.1%}"
    cards = [
        ("lines", stats.lines, "lines read", ""),
        ("unique", stats.unique, "unique resources", ""),
        ("duplicates", stats.duplicates, f"duplicates ({share} of the URLs)", " dup"),
        ("blank", stats.blank, "blank lines", ""),
        ("unparseable", stats.unparseable, "refused lines", ""),
    ]
    return "<div class='cards'>" + "".join(
        f"<div class='card{cls}' id='total-{key}'><div class='n'>{n:,}</div>"
        f"<div class='l'>{label}</div></div>" for key, n, label, cls in cards) + "</div>"


def _rung_chart(stats: DedupeStats, rungs: Sequence[Rung]) -> str:
    """A horizontal stacked bar chart (inline SVG): per rung, the duplicates and the
    first spellings whose spelling it changed."""
    rows = [(r, stats.by_rung[r.key], stats.first_by_rung[r.key]) for r in rungs]
    top = max([d + f for _, d, f in rows] + [1])
    label_w, bar_w, row_h = 330, 520, 30
    height = row_h * len(rows) + 10
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='100%' "
           f"viewBox='0 0 {label_w + bar_w + 110} {height}' "
           "aria-label='URL lines by rung of the ladder'>"]
    for i, (rung, dup, first) in enumerate(rows):
        y = 5 + i * row_h
        wd = bar_w * dup / top
        wf = bar_w * first / top
        title = "simple: already canonical" if rung is Rung.SIMPLE else rung.title
        out.append(
            f"<g id='rung-{rung.key}'><text x='0' y='{y + 19}' font-size='14' "
            f"fill='#1d2430'>{rung.section} {html.escape(title)}</text>"
            f"<rect x='{label_w}' y='{y + 5}' width='{wd:.1f}' height='18' rx='2' "
            f"fill='#d9534f'><title>{dup:,} duplicates</title></rect>"
            f"<rect x='{label_w + wd:.1f}' y='{y + 5}' width='{wf:.1f}' height='18' rx='2' "
            f"fill='#7aa6d6'><title>{first:,} first spellings</title></rect>"
            f"<text x='{label_w + wd + wf + 8:.1f}' y='{y + 19}' font-size='13' "
            f"fill='#5b6676'>{dup:,} + {first:,}</text></g>")
    out.append("</svg>")
    return "".join(out)


def _hosts(samples: Samples) -> str:
    top = samples.top_hosts()
    if not top:
        return "<p class='note'>No duplicates.</p>"
    most = top[0][1]
    rows = []
    for host, n in top:
        shown = host_to_unicode(host) if host else "(no host)"
        label = _text(shown) + (f" <span class='note'>({_text(host)})</span>"
                                if shown != host else "")
        rows.append(f"<tr><td>{label}</td><td class='num'>{n:,}</td><td style='width:45%'>"
                    f"<div class='bar' style='width:{100 * n / most:.1f}%'></div></td></tr>")
    note = ("<p class='note'>Past the first 4,096 hosts the smallest counters were dropped: "
            "the counts are lower bounds.</p>" if samples.hosts_pruned else "")
    return ("<table id='hosts'><tr><th>host</th><th class='num'>duplicate spellings</th><th></th>"
            "</tr>" + "".join(rows) + "</table>" + note)


def _clusters(samples: Samples, level: str, keep_fragment: bool, nfc: bool) -> str:
    if not samples.clusters:
        return "<p class='note'>No alias cluster sampled.</p>"
    out = []
    for key, spellings in samples.clusters.items():
        first = spellings[0]
        items = "".join(f"<li><code>{_text(shorten(s))}</code>"
                        + (" <span class='note'>(first)</span>" if i == 0 else "") + "</li>"
                        for i, s in enumerate(spellings))
        accounts = []
        for other in spellings[1:]:
            try:
                account = str(explain(first, other, level, keep_fragment=keep_fragment,
                                      nfc=nfc))
            except IRIError as exc:
                account = f"(no account: {exc})"
            accounts.append("<pre>" + "\n".join(_text(line) for line in account.split("\n"))
                            + "</pre>")
        try:
            readable = normalize(key, form="iri")
        except IRIError:
            readable = key
        also = (f" <span class='note'>{_text(shorten(readable))}</span>"
                if readable != key else "")
        out.append(f"<div class='cluster'><div class='key'>{_text(shorten(key))}{also}</div>"
                   f"<ul class='spellings'>{items}</ul>{''.join(accounts)}</div>")
    return "".join(out)


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


def render(
    stats: DedupeStats,
    samples: Samples,
    *,
    source: str,
    level: str,
    keep_fragment: bool,
    nfc: bool,
    rungs: Sequence[Rung],
    elapsed: float,
) -> str:
    """The report page of a dedupe run, as one HTML document."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    frag = "kept" if keep_fragment else "dropped (retrieval key, RFC 3987 section 5.1)"
    from iri_scrapy.version import __version__

    sections = [
        f"<h1>Dedupe report: {_text(source)}</h1>",
        f"<p class='sub'>level {html.escape(level)}, fragments {frag}, nfc "
        f"{'on' if nfc else 'off'}; {elapsed:.1f} s</p>",
        _cards(stats),
        "<h2>URL lines by rung of the ladder</h2><section class='panel'>"
        "<p class='note'>Each URL line counts under every rung (RFC 3987 section 5.3) that "
        "changed its spelling on the way to its canonical key, under <em>simple</em> if "
        "none did: from the key alone, whichever spelling came first.<span class='legend'>"
        "<span style='background:#d9534f'></span>duplicates"
        "<span style='background:#7aa6d6'></span>first spellings</span></p>"
        + _rung_chart(stats, rungs) + "</section>",
        "<h2>Hosts with most aliases</h2><section class='panel'>" + _hosts(samples)
        + "</section>",
        f"<h2>Sample alias clusters</h2><section class='panel'><p class='note'>Up to "
        f"{len(samples.clusters) or 'a few'} resources met under several spellings (found "
        "among recent first spellings), each spelling explained against the first.</p>"
        + _clusters(samples, level, keep_fragment, nfc) + "</section>",
        _rejects(stats),
        f"<footer>iri-scrapy {html.escape(__version__)}, {when}. One self-contained file: "
        "no script, nothing fetched.</footer>",
    ]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Dedupe report: {_text(source)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(sections)}</main></body></html>\n")
