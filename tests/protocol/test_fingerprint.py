"""The near-duplicate measure of content evidence: noise is excused, content never is.

Pages are rendered by one template with per-response noise; the site is calibrated
on *another* page of the template (two fetches of one spelling), then two fetches
of one resource must be the same and two resources that differ only in a part
number, an order number, a UUID, a time, a date, a link or an attribute must not.
"""

from __future__ import annotations

import random
import secrets

import pytest

from iri_scrapy.protocol.calibration import Calibration, section_of, site_of
from iri_scrapy.protocol.fingerprint import Fingerprint, Volatility, fingerprint
from iri_scrapy.protocol.rules import ProtocolRules


def _token(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
                   for _ in range(n))


def _noise(rng: random.Random) -> dict[str, str]:
    """One response's noise, by kind (written for these tests, not the generator's)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
    related = "".join(f'<li><a href="/r/{k}/">Read {words[k % 7]}</a></li>'
                      for k in rng.sample(range(30), rng.randint(1, 4)))
    return {
        "counter": f"<span class=hits>{rng.randint(1, 10**6)} visits</span>",
        "render": f"<p>Built in {rng.random():.4f}s</p>",
        "rotating": f"<div class=tip><p>{' '.join(rng.sample(words, 3))}</p></div>",
        "related": f"<aside class=rel><ul>{related}</ul></aside>",
        "age": f"<p class=age>{rng.randint(2, 50)} minutes ago</p>",
        "token": f"<p>Trace {_token(rng, rng.choice((4, 11, 24, 40)))}</p>",
        "csrf": f'<form><input type=hidden name=t value="{_token(rng, 32)}"></form>',
        "nonce": f'<script nonce="{_token(rng, 12)}">x()</script>'
                 f'<link rel=stylesheet href="/s.css?v={_token(rng, 6)}">',
        "random-attr": f'<div data-id="{_token(rng, 9)}" id="n{rng.randint(1, 9**9)}">'
                       "<span>Share</span></div>",
        "ad": f'<div class=ad><img src="/ad/{rng.randint(1, 99)}.png" alt="Ad {rng.randint(1, 9)}">'
              "</div>",
        "clock": f"<footer>Now {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}</footer>",
    }


def page(main: str, kinds: tuple[str, ...], rng: random.Random | None = None) -> Fingerprint:
    noise = _noise(rng or random.Random())
    extra = "".join(noise[k] for k in kinds)
    return fingerprint(
        f"<!doctype html><html><head><title>Shop</title></head><body><header class=top>"
        f"Shop</header><main>{main}</main><div class=side>{extra}</div></body></html>")


def calibrated(kinds: tuple[str, ...]) -> Volatility:
    volatility = Volatility()
    home = "<h1>Welcome</h1><p>Our catalogue.</p><a href='/list'>List</a>"
    for seed in (1, 2):  # (seeded: a calibration may see a random widget unchanged)
        volatility.learn(page(home, kinds, random.Random(seed)),
                         page(home, kinds, random.Random(seed + 10)))
    return volatility


KINDS = tuple(_noise(random.Random(0)))


@pytest.mark.parametrize("kind", KINDS)
def test_two_fetches_of_one_page_are_the_same_whatever_the_noise(kind: str) -> None:
    volatility = calibrated((kind,))
    main = "<h1>Item 7</h1><p>A red lamp, 40 euros.</p><a href='/item?id=8'>next</a>"
    for seed in range(20):
        rng = random.Random(seed)
        assert volatility.same(page(main, (kind,), rng), page(main, (kind,), rng.__class__()))


def test_without_calibration_noise_is_a_difference() -> None:
    main = "<h1>Item 7</h1><p>A red lamp.</p>"
    assert not Volatility().same(page(main, ("counter",)), page(main, ("counter",)))


PART = "A7K2M9Q4X8Z3P5L1"
DIFFER = {
    "part number": (f"<p>Part number {PART}</p>", f"<p>Part number {PART[:-1]}2</p>"),
    "order number": ("<p>Order 40012345</p>", "<p>Order 40012346</p>"),
    "uuid": ("<p>Object 0c2f9a54-7c1e-4b1a-9a64-3f4b2a1c9d0e</p>",
             "<p>Object 0c2f9a54-7c1e-4b1a-9a64-3f4b2a1c9d0f</p>"),
    "time": ("<p>Slot 09:15</p>", "<p>Slot 09:30</p>"),
    "date": ("<p>Day 2026-03-04</p>", "<p>Day 2026-03-05</p>"),
    "gallery data-src": ('<a href="/p/1"><img data-src="/img/1.jpg" alt=""></a>',
                         '<a href="/p/1"><img data-src="/img/2.jpg" alt=""></a>'),
    "names in title=": ('<a href="/u" title="Ann Lee"><i></i></a>',
                        '<a href="/u" title="Bob Ray"><i></i></a>'),
    "link only": ('<a href="/photo/1">Photo</a>', '<a href="/photo/2">Photo</a>'),
    "query value in a link": ('<a href="/i?id=1">Item</a>', '<a href="/i?id=2">Item</a>'),
    "rows in another order": (
        "<table><tr><td><a href='/p/1'>Ann</a></td></tr><tr><td><a href='/p/2'>Bob</a></td></tr>"
        "<tr><td><a href='/p/3'>Al</a></td></tr></table>",
        "<table><tr><td><a href='/p/3'>Al</a></td></tr><tr><td><a href='/p/1'>Ann</a></td></tr>"
        "<tr><td><a href='/p/2'>Bob</a></td></tr></table>"),
}


@pytest.mark.parametrize("name", list(DIFFER))
def test_pages_that_differ_in_content_differ_under_every_noise(name: str) -> None:
    a, b = DIFFER[name]
    volatility = calibrated(KINDS)
    head = "<h1>Catalogue</h1>"
    assert not volatility.same(page(head + a, KINDS), page(head + b, KINDS))
    assert volatility.same(page(head + a, KINDS), page(head + a, KINDS))


def test_markup_variants_of_one_text_and_links_are_the_same() -> None:
    plain = fingerprint("<html><body><h1>Post</h1><p>Text here.</p><a href='/x'>X</a></body>")
    amp = fingerprint('<html amp><body><div class="amp"><h1 class="t">Post</h1><p>Text '
                      "here.</p><nav><a href='/x'>X</a></nav></div></body>")
    assert Volatility().same(plain, amp)
    assert Volatility().same(amp, plain)


def test_a_changing_session_id_in_links_is_learned_and_only_it() -> None:
    def listing(ids: list[int]) -> Fingerprint:
        sid = secrets.token_hex(8)
        return fingerprint("<html><body><ul>" + "".join(
            f'<li><a href="/item?id={k}&sid={sid}">Item</a></li>' for k in ids) + "</ul></body>")

    volatility = Volatility()
    volatility.learn(listing([1, 2, 3]), listing([1, 2, 3]))
    assert volatility.same(listing([4, 5, 6]), listing([4, 5, 6]))
    assert not volatility.same(listing([4, 5, 6]), listing([7, 8, 9]))


def test_a_shuffled_widget_is_learned_and_a_listing_in_another_order_still_differs() -> None:
    """A tag cloud in another order on every fetch is chance, once two fetches
    showed it; the main list in another order stays a difference (a Trac report
    sorted by title shows the rows of its default order)."""
    def listing(ids: list[int], rng: random.Random) -> Fingerprint:
        tags = ["red", "green", "blue", "cyan", "pink", "gold"]
        rng.shuffle(tags)
        cloud = "".join(f"<li><a href='/tag/{t}'>{t}</a></li>" for t in tags)
        rows = "".join(f"<tr><td><a href='/t/{k}'>Ticket {k}</a></td></tr>" for k in ids)
        return fingerprint(f"<html><body><h1>Report</h1><table>{rows}</table>"
                           f"<ul class=cloud>{cloud}</ul><p>End.</p></body></html>")

    volatility = Volatility()
    assert not volatility.same(listing([1, 2, 3], random.Random(1)),
                               listing([1, 2, 3], random.Random(2)))
    volatility.learn(listing([1, 2, 3], random.Random(3)), listing([1, 2, 3], random.Random(4)))
    assert volatility.orders and not volatility.labels and not volatility.paths
    for seed in range(10):
        rng = random.Random(seed)
        assert volatility.same(listing([4, 5, 6], rng), listing([4, 5, 6], rng))
        assert not volatility.same(listing([4, 5, 6], rng), listing([6, 4, 5], rng))
    # what stands in the same order on both sides of what moved is still compared
    assert not volatility.same(listing([4, 5], random.Random(1)),
                               listing([4, 5, 6], random.Random(1)))


def test_a_stored_fingerprint_reads_back_in_order_or_is_refused() -> None:
    fp = fingerprint("<ul><li>b</li><li>a</li><li>b</li><li><a href='/x?q=1'>x</a></li></ul>")
    back = Fingerprint.from_record(fp.to_record())
    assert (back.digest, list(back.pairs), list(back.places)) == (
        fp.digest, list(fp.pairs), list(fp.places))
    assert Volatility().same(fp, back)
    other = fingerprint("<ul><li>a</li><li>b</li><li>b</li><li><a href='/x?q=1'>x</a></li></ul>")
    assert sorted(other.pairs) == sorted(fp.pairs) and other.digest != fp.digest
    assert not Volatility().same(fp, other)
    record = bytearray(fp.to_record())
    record[-8:] = record[-16:-8]  # two blocks in one place
    with pytest.raises(ValueError, match="not a permutation"):
        Fingerprint.from_record(bytes(record))


def test_empty_pages_and_opaque_digests() -> None:
    assert fingerprint("").empty and fingerprint("<html><body></body></html>").empty
    assert not Volatility().same(fingerprint(""), fingerprint(""))
    assert Volatility().same(Fingerprint.exact(b"x" * 16), Fingerprint.exact(b"x" * 16))
    assert not Volatility().same(Fingerprint.exact(b"x" * 16), Fingerprint.exact(b"y" * 16))
    for junk in ("<", "<<a href=>>", "<a href='?&&=&'>", "\ufeff<p>x", "plain\ntext\n", "<!--"):
        fingerprint(junk)  # never raises


def test_a_sample_refutes_a_rule_on_differing_parts_and_confirms_on_noise() -> None:
    host = "http://cat.test"
    rules = ProtocolRules()
    kinds = ("counter", "related", "token")
    site = rules.calibration
    first = page("<h1>Catalogue</h1>", kinds, random.Random(1))
    assert site.start(f"{host}/", first) is not None
    site.land(f"{host}/", section_of(f"{host}/"), page("<h1>Catalogue</h1>", kinds,
                                                       random.Random(2)))
    parts = [f"{PART[:-2]}{k:02d}" for k in range(6)]
    for pn in parts:  # pages that differ only in a part number never merge
        rules.observe_content(f"{host}/part?pn={pn}", page(f"<p>Part {pn}</p>", kinds))
    for pn in parts:
        assert rules.apply(f"{host}/part?pn={pn}") == f"{host}/part?pn={pn}"
    for k in range(4):  # session ids: learned from noisy pages
        body = f"<p>Item {k}</p>"
        rules.observe_content(f"{host}/item?id={k}&sid=a", page(body, kinds))
        rules.observe_content(f"{host}/item?id={k}&sid=b", page(body, kinds))
    assert rules.apply(f"{host}/item?id=9&sid=c") == f"{host}/item?id=9"
    rules.observe_content(f"{host}/item?id=5&sid=a", page("<p>Item 5</p>", kinds))
    rules.observe_content(f"{host}/item?id=5&sid=q", page("<p>Item 55</p>", kinds))
    assert rules.apply(f"{host}/item?id=9&sid=c") == f"{host}/item?id=9&sid=c"  # refuted


def test_calibration_holds_pages_until_it_lands() -> None:
    calibration = Calibration()
    fp = page("<p>x</p>", ("counter",))
    assert site_of("http://www.a.test/x") == "a.test" == site_of("http://a.test/")
    assert not calibration.hold("http://a.test/x", fp)  # nothing in flight
    section = calibration.start("http://a.test/x/", fp)
    assert section == section_of("http://a.test/x/y") == "a.test/x"
    assert calibration.start("http://a.test/x/z", fp) is None  # one per section
    assert calibration.hold("http://www.a.test/q", fp)  # the site's pages wait
    known, held = calibration.land("http://a.test/x/", section, page("<p>x</p>", ("counter",)))
    assert known and [uri for uri, _ in held] == ["http://www.a.test/q"]
    assert calibration.land("http://a.test/x/", section, None) == (False, [])  # not awaited
    assert calibration.volatility("http://www.a.test/").same(
        page("<p>y</p>", ("counter",)), page("<p>y</p>", ("counter",)))


def test_only_a_second_fetch_of_the_same_uri_calibrates() -> None:
    """In a fleet, the calibration fetch one worker asked for may be fetched by
    another, whose first page of that section is another page: two pages' every
    difference learned as chance made all a shop's items one (drop-param:id), and
    pages were lost. A fetch of another URI of the section is no calibration."""
    calibration = Calibration()
    mine = page("<h1>Item list</h1><p>2</p>", ("counter",), random.Random(1))
    theirs = page("<h1>Shop</h1><p>Welcome</p>", ("counter",), random.Random(2))
    section = calibration.start("http://a.test/list?page=2", mine)
    assert section is not None
    assert calibration.land("http://a.test/", section, theirs) == (False, [])  # not mine
    assert calibration.land_late("http://a.test/", section, theirs) is False
    item1 = page("<p>Item 1</p>", ("counter",), random.Random(3))
    item2 = page("<p>Item 2</p>", ("counter",), random.Random(4))
    assert not calibration.volatility("http://a.test/").same(item1, item2)
    assert calibration.awaits_late("http://a.test/list?page=2", section)
    again = page("<h1>Item list</h1><p>2</p>", ("counter",), random.Random(5))
    assert calibration.land("http://a.test/list?page=2", section, again)[0]
    # the counter changed: what changes by chance here is known, no later fetch
    assert not calibration.awaits_late("http://a.test/list?page=2", section)
    assert not calibration.land_late("http://a.test/list?page=2", section, again)
    assert not calibration.volatility("http://a.test/").same(item1, item2)


def test_the_later_fetch_is_awaited_only_when_the_second_showed_no_change() -> None:
    """A clock that moves by the second (Trac's "36 seconds ago") shows in no fetch
    made at once: the first page is fetched a third time a few seconds later, and
    only then (a second fetch that showed changes saw what changes here)."""
    calibration = Calibration()
    uri = "http://t.test/"
    at = "<h1>Timeline</h1><p>Ticket 7 changed {} seconds ago</p>"
    section = calibration.start(uri, fingerprint(at.format(36)))
    assert section is not None
    assert calibration.land(uri, section, fingerprint(at.format(36))) == (True, [])
    assert calibration.awaits_late(uri, section)
    assert calibration.land_late(uri, section, fingerprint(at.format(38)))
    assert not calibration.awaits_late(uri, section)
    assert calibration.volatility(uri).same(fingerprint(at.format(40)), fingerprint(at.format(9)))


def test_a_section_is_calibrated_when_its_content_first_differs() -> None:
    """Only a site's first page is calibrated at once; another section is fetched
    again when content first differs there under a candidate rule (its own noise:
    a widget the home page lacks), and the counterexample that shows as chance is
    withdrawn, its rule nominated; a real difference stays a counterexample."""
    host = "http://lazy.test"
    rules = ProtocolRules()
    site = rules.calibration
    home = page("<h1>Home</h1>", ("counter",), random.Random(1))
    assert site.start(f"{host}/", home) is not None
    site.land(f"{host}/", section_of(f"{host}/"), page("<h1>Home</h1>", ("counter",),
                                                      random.Random(2)))
    assert site.start(f"{host}/item/1", home) is None  # one section at once per site

    def item(n: int, seed: int) -> Fingerprint:  # the items' own widget: "related"
        return page(f"<p>Item {n}</p>", ("counter", "related"), random.Random(seed))

    rules.observe_content(f"{host}/item/1", item(1, 3))
    rules.observe_content(f"{host}/item/1?s=x", item(1, 4))  # differs by chance only
    assert rules.events["counterexamples"] == 1
    assert site.wanted == [(f"{host}/item/1?s=x", "lazy.test/item")]
    uri, section = site.wanted.pop()
    assert site.land(uri, section, item(1, 5)) == (True, [])  # its second fetch
    assert rules.reconsider() == 1 and rules.events["content/nominated"] == 1
    rules.observe_content(f"{host}/item/2", item(2, 6))
    rules.observe_content(f"{host}/item/2?s=y", item(2, 7))
    rules.observe_content(f"{host}/item/3", item(3, 8))
    rules.observe_content(f"{host}/item/3?s=z", item(3, 9))
    assert rules.apply(f"{host}/item/9?s=q") == f"{host}/item/9"
    rules.observe_content(f"{host}/item/4", item(4, 10))
    rules.observe_content(f"{host}/item/4?s=w", item(44, 11))  # another resource
    assert rules.apply(f"{host}/item/9?s=q") == f"{host}/item/9?s=q"  # refuted
    assert site.wanted == []  # the section was calibrated once


def _sid_page(sid: str, main: str = "<h1>Post 1</h1><p>Text.</p>") -> Fingerprint:
    """A page of a ``www.`` mirror whose every link carries one of a few session ids."""
    links = "".join(f'<li><a href="/post/{k}/?sid={sid}">Post {k}</a></li>' for k in range(3))
    return fingerprint(f"<html><body><main>{main}</main><ul>{links}</ul></body></html>")


def test_a_calibration_on_demand_fetches_again_while_what_differed_repeats() -> None:
    """Noise with few values repeats by chance (a session id of three in every link:
    1 in 3): a fetch that served again every block that differed shows nothing
    about them, so the page is fetched again, at most ON_DEMAND_FETCHES times;
    the calibration counts as in flight (what its counterexample stopped waits)
    from the moment it is wanted until the last fetch lands."""
    from iri_scrapy.protocol.calibration import MAX_AGAIN, ON_DEMAND_FETCHES

    site = Calibration()
    uri = "http://www.b.test/post/1/?sid=a"
    first, other = _sid_page("a"), fingerprint(  # (its bare twin: links with no sid)
        "<html><body><main><h1>Post 1</h1><p>Text.</p></main><ul>"
        + "".join(f'<li><a href="/post/{k}/">Post {k}</a></li>' for k in range(3))
        + "</ul></body></html>")
    assert not site.volatility(uri).same(first, other)
    section = site.want(uri, first, other)
    assert section == "www.b.test/post" and site.wanted == [(uri, section)]
    assert site.unsettled("http://b.test/post/1/")  # asked for from the moment it is queued
    site.wanted.pop()
    assert site.land(uri, section, _sid_page("a")) == (True, [])  # the same sid again
    assert site.wanted == [(uri, section)] and site.unsettled(uri)  # proves nothing: again
    site.wanted.pop()
    site.answered(uri)
    assert site.land(uri, section, _sid_page("c")) == (True, [])  # another sid: chance
    site.answered(uri)
    assert site.wanted == [] and not site.unsettled(uri)
    assert site.volatility(uri).same(first, other)  # the sid blocks change by chance

    real = Calibration()  # a real difference repeats every time: at most 3 fetches
    part = _sid_page("a", "<h1>Part</h1><p>Part number QX7-22</p>")
    section = real.want(uri, part, _sid_page("a", "<h1>Part</h1><p>Part number QX7-23</p>"))
    assert section is not None
    fetches = 0
    while real.wanted:
        real.wanted.pop()
        fetches += 1
        real.land(uri, section, _sid_page("a", "<h1>Part</h1><p>Part number QX7-22</p>"))
        real.answered(uri)
    assert fetches == ON_DEMAND_FETCHES and not real.unsettled(uri)
    assert real.want(uri, part) is None  # the section was calibrated on demand once
    elsewhere = "http://www.b.test/item/7"  # another section: fetched again no more, the
    section = real.want(elsewhere, part, _sid_page("a", "<h1>Part</h1><p>Part number QX7-23</p>"))
    assert section == "www.b.test/item"  # site's MAX_AGAIN fetches again were spent
    real.wanted.pop()
    real.land(elsewhere, section, part)
    assert real.wanted == [] and MAX_AGAIN == ON_DEMAND_FETCHES - 1
    def item(n: int) -> Fingerprint:
        return fingerprint(f"<html><head><title>Item {n}</title></head><body><h1>Item {n}</h1>"
                           f"<p>Item {n} in blue</p><p>Our shop.</p></body></html>")

    # a page that differs at three places is another resource: not fetched again at
    # all (two real applications: every such fetch was wasted, 10 to 78 paths apart)
    another = Calibration()
    assert another.want(uri, item(19), item(20)) is None and another.wanted == []
    text = Calibration()  # a text page's lines share one path: three labels, as much
    old_version = fingerprint("Title\nFirst version of the page\nWritten by ann\nShort\nFooter")
    assert text.want(uri, old_version, fingerprint(
        "Title\nSecond version of the page\nEdited by bob\nChanged today\nFooter")) is None
    assert text.wanted == [] and not text.unsettled(uri)
    rows = Calibration()  # the same rows in another order: a listing sorted otherwise
    table = "".join(f"<tr><td><a href='/t/{k}'>T{k}</a></td></tr>" for k in (1, 2, 3))
    resorted = "".join(f"<tr><td><a href='/t/{k}'>T{k}</a></td></tr>" for k in (3, 1, 2))
    assert rows.want(uri, fingerprint(f"<table>{table}</table>"),
                     fingerprint(f"<table>{resorted}</table>")) is None
    opaque = Calibration()  # two pages with no block in common: nothing to learn
    assert opaque.want(uri, Fingerprint.exact(b"a" * 16), Fingerprint.exact(b"b" * 16)) is None
    assert opaque.wanted == [] and not opaque.unsettled(uri)


def test_the_first_pages_section_is_calibrated_on_demand_too() -> None:
    """The site's first page's own fetches may repeat noise with few values (a
    greeting of four, an A/B variant): when content later differs in that
    section under a candidate rule, it is calibrated on demand all the same."""
    site = Calibration()
    home = "http://g.test/"
    hello = fingerprint("<html><body><h1>Home</h1><div class=hello>Hello, reader!</div>"
                        "</body></html>")
    section = site.start(home, hello)
    assert section == "g.test/"
    site.land(home, section, hello)  # the greeting repeated (1 in 4)
    welcome = fingerprint("<html><body><h1>Home</h1><div class=hello>Welcome back, reader!"
                          "</div></body></html>")
    assert not site.volatility(home).same(hello, welcome)
    assert site.want("http://g.test/index.html", welcome, hello) == "g.test/index.html"
    assert site.want(home, welcome, hello) == "g.test/"  # the first page's section too
    assert sorted(site.wanted) == [(home, "g.test/"), ("http://g.test/index.html",
                                                       "g.test/index.html")]


def test_a_trap_whose_calibration_missed_a_rotating_widget_is_calibrated_on_demand() -> None:
    """The site's first page showed the same ad word in both fetches (1 in 22), so
    only that word was learned as chance, not the ad's place: every calendar page
    then differs from the next by its ad, and the trap rule was never nominated (a
    calendar fetched to its end).  A difference between two spellings one trap
    step apart asks for a calibration of their section, which shows the ad rotate."""
    host = "http://cal.test"

    def cal(path: str, word: str, pct: int) -> Fingerprint:
        return fingerprint(f"<html><body><h1>Calendar</h1><p>{path}</p><p>No events.</p>"
                           f"<aside class=promo><p>{word} sale: {pct}% off</p></aside>"
                           "</body></html>")

    rules = ProtocolRules()
    site = rules.calibration
    section = site.start(f"{host}/", cal("home", "Maple", 35))
    assert section is not None
    site.land(f"{host}/", section, cal("home", "Maple", 40))  # the word repeated
    rules.observe_content(f"{host}/m/6/next/", cal("month 7", "Cedar", 10))
    rules.observe_content(f"{host}/m/6/next/next/", cal("month 7", "River", 22))
    assert site.wanted == [(f"{host}/m/6/next/next/", "cal.test/m")]
    uri, section = site.wanted.pop()
    site.land(uri, section, cal("month 7", "Stone", 5))  # fetched again: the ad rotates
    assert rules.reconsider() == 1
    assert rules.events["content/nominated"] == 1


def test_what_pages_share_is_kept_from_page_to_page_and_changes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag's blocks, a hash, a run's label are kept across pages (a site's pages
    share their menus): a page fingerprints the same after others as on its own.
    (The pure-Python cutter's tables; the C cutter's are checked by
    test_fingerprint_same, whose pages run one after another in one process.)"""
    from iri_scrapy.protocol import fingerprint as module

    monkeypatch.setattr(module, "_CUT", None)

    menu = ('<nav class="menu"><a href="/a?x=1" title="A">A</a><a href="/b">B</a></nav>'
            '<div class="side"><img src="/i.png" alt="logo"> Side text</div>')
    pages = [f'<html><body>{menu}<h1>Page {i}</h1><p>Body &amp; {i}<a href="/p{i}">n</a>'
             f'</p>{menu}</body></html>' for i in range(5)]
    warm = [fingerprint(page) for page in pages]
    assert module._TAGS and module._HASHES and module._LED
    for page, fp in zip(pages, warm, strict=True):
        for table in (module._TAGS, module._HASHES, module._LED):
            table.clear()
        cold = fingerprint(page)
        assert (cold.pairs, cold.labels, cold.paths, cold.digest) == (
            fp.pairs, fp.labels, fp.paths, fp.digest)
    monkeypatch.setattr(module, "_KEPT_PER_TABLE", 40)  # the tables are bounded
    for i in range(100):
        fingerprint(f'<div class="c"><a href="/x{i}" title="t{i}">w{i}</a> <p>v{i} s</p></div>')
        assert max(map(len, (module._TAGS, module._HASHES, module._LED))) <= 40 + 8
