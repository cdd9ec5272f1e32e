"""What learned rules skipped is given back, exactly, when a rule is revoked (5.3.4).

The dupefilter at level ``protocol`` with real Scrapy requests: a request dropped
only because a learned rule merged it is kept by :class:`Learned`; after a
counterexample revokes that rule, :meth:`Learned.changed` gives back exactly the
requests it had merged (the same objects), and none merged by a rule still in
force.  Samples: per rule, merges K * 2**j from 2**j = 2**(c-1) on (K:
``IRI_PROTOCOL_SAMPLE_EVERY``, c its confirmations) are let through, marked
``meta["iri_protocol_sample"]``; an alias met twice is counted once.  Deferral:
just before download, a fetch that would only re-confirm a rule being learned is
kept until the rule is decided, then merged or given back; a request kept after
it passed the filter comes back past it.
"""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy.core.ladder import Level
from iri_scrapy.plugin.config import META_DEFERRED, META_SAMPLE, IRIConfig
from iri_scrapy.plugin.dupefilter import (
    STAT_DECIDED_BY_PREFIX,
    STAT_FILTERED,
    STAT_STOCK_ALIASES,
    IRIDupeFilter,
)
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.protocol.learned import Learned
from iri_scrapy.protocol.rules import ProtocolRules
from tests.protocol import protocol_filter

B = "http://blog.test"


def D(n: int) -> bytes:  # noqa: N802 - a digest stand-in
    return n.to_bytes(16, "big")


def learned_filter(sample_every: int = 10) -> tuple[ProtocolRules, IRIDupeFilter]:
    rules = ProtocolRules(sample_every=sample_every)
    for n in (1, 2):  # two confirmations each: drop replytocom, drop utm_source
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?replytocom=9{n}", D(n))
        rules.observe_content(f"{B}/p/{n}/?utm_source=x{n}", D(n))
    assert [kind for kind, _ in rules.host_rules(B + "/")] == ["drop-param", "drop-param"]
    df = protocol_filter(rules)
    return rules, df


def test_a_revoked_rule_gives_back_exactly_what_it_skipped() -> None:
    rules, df = learned_filter()
    assert df.learned is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    replies = [Request(f"{B}/p/5/?replytocom={i}") for i in range(1, 6)]
    utms = [Request(f"{B}/p/5/?utm_source={i}") for i in range(1, 4)]
    assert all(df.request_seen(r) for r in replies + utms)
    assert len(df.learned.skipped) == 8
    assert df.learned.changed() == []  # nothing stopped
    # the content of /p/3/ differs with ?replytocom: that rule is wrong, for good
    rules.observe_content(f"{B}/p/3/", D(3))
    rules.observe_content(f"{B}/p/3/?replytocom=1", D(33))
    assert [param for _, param in rules.host_rules(B + "/")] == ["utm_source"]
    back = df.learned.changed()
    assert sorted(r.url for r in back) == sorted(r.url for r in replies)
    assert all(any(b is r for r in replies) for b in back)  # the very requests
    assert len(df.learned.skipped) == 3  # the utm_source ones stay kept
    # given back, they pass the dupefilter now (their keys were never seen)
    assert not any(df.request_seen(r) for r in back)


def test_samples_per_rule_each_alias_once() -> None:
    rules, df = learned_filter(sample_every=3)
    assert not df.request_seen(Request(f"{B}/p/7/"))
    verdicts = []
    for i in range(1, 25):
        request = Request(f"{B}/p/7/?replytocom={i}")
        verdicts.append((df.request_seen(request), bool(request.meta.get(META_SAMPLE))))
    # a rule with two confirmations: merges 6, 12, 24 are fetched as samples (2K, 4K, 8K)
    assert [i + 1 for i, (seen, _) in enumerate(verdicts) if not seen] == [6, 12, 24]
    assert all(sample for seen, sample in verdicts if not seen)
    # an alias met again is a plain duplicate: counted once
    assert df.request_seen(Request(f"{B}/p/7/?replytocom=1"))
    assert df.request_seen(Request(f"{B}/p/7/?replytocom=6"))
    assert rules.events["content/sampled"] == 3


def test_pages_held_behind_an_alias_met_first_are_sampled_too() -> None:
    """An alias fetched first holds its page's key: the page itself, linked later,
    is held by the rule that moved the alias (merged == its own key), and counts
    as one of that rule's merges; without that count, a wrong rule met alias
    first held every page behind its alias unchecked (and a closing sample is
    taken only where no confirmation is)."""
    rules, df = learned_filter(sample_every=3)
    learned = df.learned
    assert learned is not None
    verdicts = []
    for n in range(10, 34):
        assert not df.request_seen(Request(f"{B}/p/{n}/?replytocom=1"))  # the holder
        page = Request(f"{B}/p/{n}/")
        verdicts.append((df.request_seen(page), bool(page.meta.get(META_SAMPLE))))
    assert [i + 1 for i, (seen, _) in enumerate(verdicts) if not seen] == [6, 12, 24]
    assert all(sample for seen, sample in verdicts if not seen)
    assert rules.events["content/sampled"] == 3


# --- deferral: aliases that would only re-confirm a rule being learned --------


def learning_filter() -> tuple[ProtocolRules, IRIDupeFilter]:
    """``drop-param:replytocom`` nominated with one confirmation (needs two)."""
    rules = ProtocolRules()
    rules.observe_content(f"{B}/p/1/", D(1))
    rules.observe_content(f"{B}/p/1/?replytocom=9", D(1))
    rules.observe_content(f"{B}/p/2/", D(2))
    assert rules.needed((B, "drop-param", "replytocom")) == 1
    return rules, protocol_filter(rules)


def scheduled(df: IRIDupeFilter, url: str) -> Request:
    request = Request(url)
    assert not df.request_seen(request)  # a new key: the rule is not in force yet
    return request


def test_only_the_confirmations_a_rule_needs_are_fetched() -> None:
    rules, df = learning_filter()
    learned = df.learned
    assert learned is not None
    confirming = scheduled(df, f"{B}/p/2/?replytocom=1")
    same_image = scheduled(df, f"{B}/p/2/?replytocom=2")
    confirmed_image = scheduled(df, f"{B}/p/1/?replytocom=3")
    assert not learned.defer(confirming)  # the one confirmation still needed
    assert learned.defer(same_image)  # a second fetch of /p/2/ while one is in flight
    assert learned.defer(confirmed_image)  # /p/1/ confirmed the rule already
    assert set(learned.deferred) == {same_image.url, confirmed_image.url}
    # the confirming fetch is served: the rule is in force, the deferred are merged
    rules.observe_content(confirming.url, D(2))
    learned.fetched(confirming)
    assert learned.settle() == []
    assert learned.deferred == {}
    assert {b for b in learned.skipped} == {same_image.url, confirmed_image.url}
    assert rules.events["deferred"] == 2 and rules.events["deferred_merged"] == 2


def test_deferred_requests_come_back_when_the_rule_is_refuted() -> None:
    rules, df = learning_filter()
    learned = df.learned
    assert learned is not None
    confirming = scheduled(df, f"{B}/p/2/?replytocom=1")
    waiting = scheduled(df, f"{B}/p/2/?replytocom=2")
    assert not learned.defer(confirming)
    assert learned.defer(waiting)
    rules.observe_content(confirming.url, D(22))  # other content: the rule is wrong
    learned.fetched(confirming)
    back = learned.settle()
    assert [r.url for r in back] == [waiting.url]
    assert back[0].dont_filter and back[0].meta[META_DEFERRED]
    assert not learned.defer(back[0])  # never deferred twice
    assert rules.events["deferred_fetched"] == 1


def test_an_idle_crawl_gets_every_deferred_request_back() -> None:
    rules, df = learning_filter()
    learned = df.learned
    assert learned is not None
    confirming = scheduled(df, f"{B}/p/2/?replytocom=1")
    waiting = scheduled(df, f"{B}/p/2/?replytocom=2")
    assert not learned.defer(confirming)
    assert learned.defer(waiting)
    assert learned.settle() == []  # nothing decided yet: it keeps waiting
    assert [r.url for r in learned.settle(everything=True)] == [waiting.url]
    assert learned.deferred == {}


def test_an_alias_of_a_page_in_flight_is_a_duplicate() -> None:
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    first = scheduled(df, f"{B}/i?id=6&sid=a")
    second = scheduled(df, f"{B}/i?id=6&sid=b")  # scheduled before any rule was known
    assert not learned.stale(first) and not learned.defer(first)  # in flight now
    for n in (1, 2):  # drop-param:sid learned meanwhile from other pages
        rules.observe_content(f"{B}/i?id={n}", D(n))
        rules.observe_content(f"{B}/i?id={n}&sid=x{n}", D(n))
    assert rules.apply(second.url) == f"{B}/i?id=6"
    assert learned.stale(second)  # merged with the one in flight: kept, not fetched
    assert second.url in learned.skipped
    learned.fetched(first)
    assert not learned.stale(scheduled(df, f"{B}/i?id=7&sid=c"))


def test_a_redirect_to_a_key_another_request_added_is_a_duplicate() -> None:
    rules = ProtocolRules()
    df = protocol_filter(rules)
    source = scheduled(df, f"{B}/a")  # keyed /a: no rule yet
    scheduled(df, f"{B}/a/")  # linked too: keyed /a/
    for n in ("x", "y"):  # then add-slash is learned from two permanent redirects
        rules.observe_redirect(f"{B}/{n}", f"{B}/{n}/", 301)
    assert rules.apply(f"{B}/a") == f"{B}/a/"
    redirected = source.replace(url=f"{B}/a/",
                                meta={**source.meta, "redirect_urls": [f"{B}/a"]})
    assert df.request_seen(redirected)  # /a/ is fetched once, by its own request
    # a source keyed /b/ (the rule in force when it was scheduled): its redirect
    # to /b/ is the one fetch of that key
    source = scheduled(df, f"{B}/b")
    redirected = source.replace(url=f"{B}/b/",
                                meta={**source.meta, "redirect_urls": [f"{B}/b"]})
    assert not df.request_seen(redirected)


def test_a_request_kept_after_the_filter_comes_back_past_it() -> None:
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    late = scheduled(df, f"{B}/p/5/?replytocom=1")  # a new key: no rule yet
    rules.observe_content(f"{B}/p/5/", D(5))  # served, then replytocom is learned
    for n in (1, 2):
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?replytocom=9{n}", D(n))
    assert learned.stale(late)  # kept just before download
    rules.observe_content(f"{B}/p/3/", D(3))
    rules.observe_content(f"{B}/p/3/?replytocom=1", D(33))  # the rule is wrong
    back = learned.changed()
    assert [r.url for r in back] == [late.url]
    assert back[0].dont_filter  # its own key is in the filter: it must not be dropped
    assert df.request_seen(late)  # (what the filter would have said)


def test_a_deferred_request_that_holds_its_own_key_is_fetched() -> None:
    """The recrawl loss (CI, stop 27): rules loaded from the last crawl have
    ``drop-param:ref&sid`` in force and ``drop-param:sid`` nominated, its image
    ``?id=13&ref=l3`` confirmed once.  The first link to item 13 passes the filter
    keyed ``?id=13``; just before download ``drop-param:sid`` would only re-confirm,
    so it was deferred, "merged" into ``?id=13`` (its own key, never fetched) once
    anything settled, and item 13 was never fetched."""
    S = "http://shop.test"  # noqa: N806
    first = ProtocolRules()
    for n in (1, 2):  # ref&sid together, twice (in force)
        first.observe_canonical(f"{S}/i?id={n}&sid=a{n}&ref=l{n}", f"{S}/i?id={n}")
        first.observe_content(f"{S}/i?id={n}&sid=a{n}&ref=l{n}", D(n))
        first.observe_content(f"{S}/i?id={n}", D(n))
    first.observe_content(f"{S}/i?id=13&ref=l3", D(13))  # sid alone: nominated
    first.observe_content(f"{S}/i?id=13&sid=b&ref=l3", D(13))
    rules = ProtocolRules.from_data(first.to_data())
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    request = scheduled(df, f"{S}/i?id=13&sid=c&ref=l3")
    assert rules.apply(request.url) == f"{S}/i?id=13"
    assert any(identity[2] == "sid" for identity, _, _ in rules.pending(request.url))
    assert not learned.stale(request)
    deferred = learned.defer(request)
    other = scheduled(df, f"{S}/i?id=14&sid=c&ref=l3")  # another fetch ends meanwhile
    assert not learned.stale(other) and not learned.defer(other)
    rules.observe_content(f"{S}/i?id=14", D(14))
    learned.fetched(other)
    back = learned.settle()
    # it is fetched: now, or given back by the settle (never kept as a duplicate)
    assert not deferred or [r.url for r in back] == [request.url]
    assert request.url not in learned.skipped and learned.deferred == {}


def test_a_key_whose_holder_a_revoked_rule_moved_away_is_fetched() -> None:
    """The simulation's find (a colour variant declaring the standard item
    canonical): ``/p/5/?utm_source=x`` is let through keyed ``/p/5/`` by a rule in
    force, so the link to ``/p/5/`` itself is kept as its duplicate.  The rule is
    then refuted: that alias has a key of its own again and no page was ever served
    under ``/p/5/``.  The kept request comes back and holds its key, so ``/p/5/`` is
    fetched, once: a later link to it is its duplicate."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    alias = scheduled(df, f"{B}/p/5/?utm_source=x")  # keyed /p/5/ by drop utm_source
    standard = Request(f"{B}/p/5/")
    assert df.request_seen(standard) and standard.url in learned.skipped
    assert not learned.stale(alias) and not learned.defer(alias)
    rules.observe_content(alias.url, D(55))
    learned.fetched(alias)
    for n in (3, 4):  # utm_source changes the body after all: the rule stops
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?utm_source=1", D(10 * n))
    assert rules.apply(alias.url) == alias.url
    back = learned.changed()
    assert [r.url for r in back] == [standard.url] and back[0].dont_filter
    assert df.request_seen(Request(f"{B}/p/5/"))  # a duplicate of the one given back


def test_rules_without_their_learned_are_refused() -> None:
    """A bare dupefilter over rules must be given the Learned that keeps what they skip
    (the add-on's context builds both): without it a merged request would be lost."""
    with pytest.raises(ValueError, match="rules without learned"):
        IRIDupeFilter(config=IRIConfig(level=Level.PROTOCOL), rules=ProtocolRules())


# ------------------------------------------- what the dupefilter counts, debug or not

def protocol_crawl(debug: bool) -> dict[str, int]:
    """At level protocol, with two learned rules in force (drop ``replytocom``,
    ``utm_source``): a page, five aliases (one linked four times), and a page
    whose alias came first."""
    rules, _ = learned_filter()
    crawler = get_crawler(Spider, {"IRI_LEVEL": "protocol", "DUPEFILTER_DEBUG": debug})
    config = IRIConfig(level=Level.PROTOCOL)
    fingerprinter = IRIRequestFingerprinter(config=config, rules=rules)
    df = IRIDupeFilter(fingerprinter=fingerprinter, config=config, rules=rules,
                       learned=Learned(None, rules, fingerprinter.stamper),
                       stats=crawler.stats, debug=debug)
    urls = [f"{B}/p/5/", *(f"{B}/p/5/?replytocom={i}" for i in range(1, 6)),
            *[f"{B}/p/5/?replytocom=1"] * 3, f"{B}/p/6/?replytocom=1", f"{B}/p/6/"]
    for url in urls:
        request = Request(url)
        if df.request_seen(request):
            df.log(request)
    return {k: v for k, v in crawler.stats.get_stats().items() if k.startswith(
        ("dupefilter/", "iri/dupefilter/"))}


def test_protocol_merges_are_counted_without_debug() -> None:
    """Learned rules' merges count under ``protocol`` whether ``DUPEFILTER_DEBUG`` is on
    or not, and the fetches stock would have made once per stock fingerprint: five
    ``replytocom`` aliases of /p/5/ and /p/6/ (its alias was fetched first)."""
    quiet, loud = protocol_crawl(False), protocol_crawl(True)
    assert quiet == loud == {
        STAT_FILTERED: 9,
        STAT_DECIDED_BY_PREFIX + "protocol": 9,
        STAT_STOCK_ALIASES: 6,
    }


def test_a_request_read_back_from_a_store_is_checked_before_download() -> None:
    """A request read back from the Redis queue or the JOBDIR store is a new object
    with no stamp: the check before download stamps it, and a rule learned since it
    was scheduled merges it with the page served (two fleet workers made 2.5x server
    hits per resource when it was let through)."""
    rules, df = learned_filter()
    assert df.learned is not None
    request = Request(f"{B}/p/1/?replytocom=7")  # as the codec decodes it: unstamped
    assert df.learned.stamper.stamp_of(request) is None
    assert df.learned.stale(request)


def test_at_the_close_what_no_page_stands_for_is_fetched() -> None:
    """:meth:`Learned.unstood`: a held request whose key's holder never ended 2xx
    (failed, not found, in flight at a kill) is given back past the filter; one
    merged with a page served stays held."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    for n in (5, 6):
        assert not df.request_seen(Request(f"{B}/p/{n}/"))
    held = [Request(f"{B}/p/{n}/?replytocom=1") for n in (5, 6)]
    assert all(df.request_seen(r) for r in held)
    learned.observe_content(f"{B}/p/6/", D(6))  # /p/5/ never answered 2xx
    back = learned.unstood()
    assert [r.url for r in back] == [held[0].url] and back[0].dont_filter
    assert list(learned.skipped) == [held[1].url]
    assert rules.events["unstood"] == 1
    assert learned.unstood() == []


def test_a_request_given_back_at_the_close_is_not_held_again() -> None:
    """In a fleet the page a held request stands for may be another worker's: a
    copy of a request :meth:`Learned.unstood` gave back, met again (the link on a
    page fetched again), is a duplicate of that fetch, not held and given back
    at every idle (the close would never come)."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    alias = f"{B}/p/5/?replytocom=1"
    assert df.request_seen(Request(alias))
    assert [r.url for r in learned.unstood()] == [alias]  # no page stood for it here
    assert df.request_seen(Request(alias))  # the same link met again: dropped
    assert learned.skipped == {} and learned.unstood() == []


def served_first(df: IRIDupeFilter, url: str, digest: bytes) -> Learned:
    """*url* scheduled, fetched and served (2xx, *digest*) while no rule is known;
    the filter's :class:`Learned`."""
    learned = df.learned
    assert learned is not None
    first = scheduled(df, url)
    assert not learned.stale(first)
    learned.observe_content(url, digest)
    learned.fetched(first)
    return learned


def _served_then_sid_rule() -> tuple[ProtocolRules, IRIDupeFilter, Learned]:
    """``?id=6&sid=a`` scheduled and served while no rule is known, then
    drop-param:sid learned from other pages."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = served_first(df, f"{B}/i?id=6&sid=a", D(6))
    for n in (1, 2):
        rules.observe_content(f"{B}/i?id={n}", D(n))
        rules.observe_content(f"{B}/i?id={n}&sid=x{n}", D(n))
    return rules, df, learned


def test_a_spelling_served_here_is_not_fetched_again_while_a_copy_of_it_is_kept() -> None:
    """In breadth-first order a spelling served before a rule was learned is met again
    after it, under several keys: one copy is kept (a duplicate of the key another
    spelling now holds), and another one (here with a fragment) reaches the
    downloader: it is skipped (``refetch-avoided``), the spelling was served; it
    was fetched again before (534 URLs twice on the session-id site)."""
    rules, df, learned = _served_then_sid_rule()
    scheduled(df, f"{B}/i?id=6&sid=b")  # holds the key /i?id=6 now
    assert df.request_seen(Request(f"{B}/i?id=6&sid=a"))  # kept (or sampled)
    base = f"{B}/i?id=6&sid=a"
    assert base in learned.skipped or base in learned.sampled
    assert learned.stale(Request(f"{B}/i?id=6&sid=a#top"))
    assert rules.events["refetch-avoided"] == 1


def test_a_spelling_served_here_is_not_fetched_again_when_rules_move_its_key() -> None:
    """The filter keys ``?sid=a`` apart while no rule is known; once drop-param:sid is
    learned, a link to that same spelling has a new key (``/i?id=6``) and passes the
    filter: the downloader skips it (``refetch-avoided``), it was served. A page an
    earlier run served (replayed from the frontier's store) is no such proof: the
    spider may never have had it, and the request the frontier gave back is fetched."""
    rules, df, learned = _served_then_sid_rule()
    again = scheduled(df, f"{B}/i?id=6&sid=a")  # the same spelling: a new key now
    assert learned.stale(again)
    assert rules.events["refetch-avoided"] == 1
    replayed = scheduled(df, f"{B}/i?id=8&sid=b")
    learned.observe_content(f"{B}/i?id=8&sid=b", D(8), replayed=True)
    assert not learned.stale(replayed)


def test_a_spelling_scheduled_before_the_rule_is_not_fetched_while_a_copy_is_kept() -> None:
    """Another spelling (``?sid=b``) scheduled under its own key before the rule, then
    linked again after it: that copy is kept (a page of its key was served), and the
    first copy reaching the downloader is its duplicate, skipped: one request per
    key, as the filter would have said had the rule been known.  It was fetched
    (494 extra fetches on the session-id site: 1.84 hits per resource, now 1.03)."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    first = scheduled(df, f"{B}/i?id=6&sid=a")
    early = scheduled(df, f"{B}/i?id=6&sid=b")  # its own key: no rule yet
    assert not learned.stale(first) and not learned.defer(first)
    learned.observe_content(f"{B}/i?id=6&sid=a", D(6))
    learned.fetched(first)
    for n in (1, 2):
        rules.observe_content(f"{B}/i?id={n}", D(n))
        rules.observe_content(f"{B}/i?id={n}&sid=x{n}", D(n))
    again = scheduled(df, f"{B}/i?id=6&sid=b")  # the key /i?id=6, new to the filter
    assert learned.stale(again)  # a page stands for it: kept
    assert f"{B}/i?id=6&sid=b" in learned.skipped
    assert learned.stale(early)  # its duplicate
    assert list(learned.skipped) == [f"{B}/i?id=6&sid=b"]  # given back if the rule stops


def test_a_spelling_fetched_after_all_leaves_no_kept_copy_behind() -> None:
    """A copy of a spelling is kept for a key no page stands for yet (its holder is
    queued), and the copy scheduled before the rule reaches the download first: it
    is fetched, and the kept copy goes (else it came back at the close, or when the
    rule stopped, for a second fetch of the same URL); the holder is then a
    duplicate of it."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    early = scheduled(df, f"{B}/i?id=6&sid=b")  # its own key: no rule yet
    for n in (1, 2):
        rules.observe_content(f"{B}/i?id={n}", D(n))
        rules.observe_content(f"{B}/i?id={n}&sid=x{n}", D(n))
    holder = scheduled(df, f"{B}/i?id=6&sid=a")  # the first of the key /i?id=6
    assert df.request_seen(Request(f"{B}/i?id=6&sid=b"))  # kept: the holder stands for it
    assert f"{B}/i?id=6&sid=b" in learned.skipped
    assert not learned.stale(early) and not learned.defer(early)  # fetched after all
    assert learned.skipped == {}
    assert learned.stale(holder)  # a duplicate of it, in flight


def test_a_sample_and_a_request_of_one_spelling_are_fetched_once() -> None:
    """A rule's sample is a request like any other at the download: a spelling in
    flight (or served here) is not fetched again for it, and a sample in flight
    counts as its spelling in flight (both were fetched: 9 URLs twice)."""
    rules, df, learned = _served_then_sid_rule()
    plain = scheduled(df, f"{B}/i?id=7&sid=b")
    assert not learned.stale(plain) and not learned.defer(plain)  # in flight
    sample = Request(f"{B}/i?id=7&sid=b#top", meta={META_SAMPLE: True})
    assert learned.stale(sample)
    sample = Request(f"{B}/i?id=8&sid=c", meta={META_SAMPLE: True})
    assert not learned.stale(sample) and not learned.defer(sample)  # in flight
    assert learned.stale(Request(f"{B}/i?id=8&sid=c#top"))
    learned.fetched(sample)
    assert not learned.stale(scheduled(df, f"{B}/i?id=9&sid=c"))


def _kept_copy_served() -> tuple[ProtocolRules, Learned, str]:
    """``/q/5/?replytocom=1`` kept behind ``/q/5/`` (drop-param:replytocom), then
    its own spelling served here (another copy of it was fetched)."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    assert not df.request_seen(Request(f"{B}/q/5/"))
    alias = f"{B}/q/5/?replytocom=1"
    assert df.request_seen(Request(alias))  # kept
    learned.observe_content(alias, D(5))
    return rules, learned, alias


def test_at_the_close_a_kept_copy_of_a_spelling_served_here_is_no_sample() -> None:
    """:meth:`Learned.unstood` takes one sample per rule and folder no page confirmed
    the rule in; a kept request whose own spelling was served is no sample (its
    page is known): it stays held, not fetched again."""
    _, learned, alias = _kept_copy_served()  # the only page of the key: no page
    # confirmed the rule under /q/
    assert learned.unstood() == []
    assert alias in learned.skipped


def test_at_the_close_a_kept_copy_of_a_spelling_served_here_whose_rule_stopped_stays() -> None:
    """A kept copy of a spelling served here is not fetched at the close even when
    its rule stopped meanwhile (its key moved back): its page is known.  It was
    given back, and the very URL fetched twice (a held-out blog's ``www.`` home)."""
    rules, learned, alias = _kept_copy_served()
    rules.observe_content(f"{B}/p/3/", D(3))
    rules.observe_content(f"{B}/p/3/?replytocom=1", D(33))  # the rule is wrong
    assert rules.apply(alias) == alias
    assert learned.unstood() == []


def _sid_rule_in_force() -> tuple[ProtocolRules, IRIDupeFilter, Learned]:
    """drop-param:sid learned (in force) before any request of ``/i?id=6``."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    for n in (1, 2):
        rules.observe_content(f"{B}/i?id={n}", D(n))
        rules.observe_content(f"{B}/i?id={n}&sid=x{n}", D(n))
    assert rules.apply(f"{B}/i?id=6&sid=a") == f"{B}/i?id=6"
    return rules, df, learned


def test_kept_requests_of_one_key_nothing_stands_for_come_back_as_one() -> None:
    """Two spellings of one key are kept (one behind the key's holder, the holder
    behind a third spelling in flight), and the fetch in flight fails: nothing
    stands for the key, so one of them is given back, and holds the key; the
    other stays kept behind it.  Both came back, and the page was fetched twice
    (57 pages with two items on the session-id site in Scrapy's default order)."""
    rules, df, learned = _sid_rule_in_force()
    holder = scheduled(df, f"{B}/i?id=6&sid=a")  # the first of the key /i?id=6
    assert df.request_seen(Request(f"{B}/i?id=6&sid=b"))  # kept behind it
    flying = Request(f"{B}/i?id=6&sid=c")  # (a copy the filter let through before)
    assert not learned.stale(flying) and not learned.defer(flying)  # in flight
    assert learned.stale(holder)  # a duplicate of the fetch in flight: kept
    assert set(learned.skipped) == {f"{B}/i?id=6&sid=a", f"{B}/i?id=6&sid=b"}
    learned.fetched(flying)  # it failed: no page for the key
    back = learned.changed(force=True)
    assert len(back) == 1, [r.url for r in back]
    assert len(learned.skipped) == 1  # the other, behind the one given back
    assert learned.changed(force=True) == []


def test_a_request_given_back_is_not_fetched_while_its_spelling_is_in_flight() -> None:
    """A kept request given back (with ``dont_filter``: the filter has its key) is
    still the learner's at the download, not the spider's own ``dont_filter``
    request: while another copy of its very spelling is in flight (another
    fragment, a sample), it is skipped (``refetch-avoided``).  Both were fetched
    (the session-id site in Scrapy's default order: a page, two items)."""
    rules, df, learned = _sid_rule_in_force()
    holder = scheduled(df, f"{B}/i?id=6&sid=a#intro")  # the first of the key /i?id=6
    flying = Request(f"{B}/i?id=6&sid=c")
    assert not learned.stale(flying) and not learned.defer(flying)  # in flight
    assert learned.stale(holder)  # a duplicate of the fetch in flight: kept
    learned.fetched(flying)  # it failed: no page for the key
    (back,) = learned.changed(force=True)  # the kept one holds the key now
    copy = Request(f"{B}/i?id=6&sid=a#porting", meta={META_SAMPLE: True})
    assert not learned.stale(copy) and not learned.defer(copy)  # fetched first
    assert back.dont_filter and learned.stale(back)  # its spelling is in flight
    assert rules.events["refetch-avoided"] == 1


def test_a_kept_request_whose_own_key_the_filter_has_comes_back_past_it() -> None:
    """When its rule stops, a kept request comes back with ``dont_filter`` if the
    filter has its own key (another copy passed under it before: a copy in the
    fleet's queue, a spelling met before the rule), else it would be dropped as a
    duplicate of itself and its page lost; without, it keeps the filter's checks."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None and learned.seen is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    for alias in ("replytocom=1", "replytocom=2"):
        assert df.request_seen(Request(f"{B}/p/5/?{alias}"))
    assert {f"{B}/p/5/?replytocom=1", f"{B}/p/5/?replytocom=2"} <= set(learned.skipped)
    rules.observe_content(f"{B}/p/3/?replytocom=9", D(99))  # another page: the rule
    rules.observe_content(f"{B}/p/3/", D(3))  # is wrong, revoked
    df.seen_add(df.fingerprint(Request(f"{B}/p/5/?replytocom=1")))  # its own key, seen
    back = {r.url: r.dont_filter for r in learned.changed()}
    assert back == {f"{B}/p/5/?replytocom=1": True, f"{B}/p/5/?replytocom=2": False}, back


# --- rules learned one after another ------------------------------------------

W = "http://www.blog.test"


def _www_rules(rules: ProtocolRules) -> None:
    """remove-www (the twins' home pages equal) and the ``www.`` host's own
    drop-param:sid, each with two confirmations."""
    for path in ("/", "/about/"):
        rules.observe_content(f"{B}{path}", D(hash(path) & 0xFFFF))
        rules.observe_content(f"{W}{path}", D(hash(path) & 0xFFFF))
    for n in (1, 2):
        rules.observe_content(f"{W}/s/{n}/", D(100 + n))
        rules.observe_content(f"{W}/s/{n}/?sid=x{n}", D(100 + n))
    assert rules.apply(f"{W}/p/5/?sid=a") == f"{B}/p/5/"


def test_a_page_served_under_an_alias_two_rules_merge_holds_its_key() -> None:
    """``www.h/p/5/?sid=a`` served before any rule was known, then the ``www.``
    host's drop-param:sid and remove-www learned: ``h/p/5/`` (a new key to the
    filter) is the page served already, through two rules. The downloader keeps
    it (``alias-first``) instead of fetching it a second time (on the held-out
    blogs every post was fetched under both spellings)."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = served_first(df, f"{W}/p/5/?sid=a", D(5))
    _www_rules(rules)
    assert rules.served_alias(f"{B}/p/5/") == f"{W}/p/5/?sid=a"
    page = scheduled(df, f"{B}/p/5/")
    assert learned.stale(page)
    assert rules.events["alias-first"] == 1
    assert f"{B}/p/5/" in learned.skipped  # given back if the alias stops mapping here


def test_a_kept_request_a_further_rule_merges_on_stays_kept() -> None:
    """``www.h/p/5/?sid=a`` kept as a duplicate of ``h/p/5/?sid=a`` (remove-www);
    once the ``www.`` host's drop-param:sid holds, its key is ``h/p/5/``, a key the
    filter has: the filter's decision applies there (kept again), where it was
    given back and fetched (a merge that moved on, not one that stopped)."""
    rules = ProtocolRules()
    for path in ("/", "/about/"):
        rules.observe_content(f"{B}{path}", D(hash(path) & 0xFFFF))
        rules.observe_content(f"{W}{path}", D(hash(path) & 0xFFFF))
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    scheduled(df, f"{B}/p/5/?sid=a")  # holds the key h/p/5/?sid=a
    scheduled(df, f"{B}/p/5/")  # holds the key h/p/5/
    alias = f"{W}/p/5/?sid=a"
    assert df.request_seen(Request(alias))
    assert learned.skipped[alias][1] == f"{B}/p/5/?sid=a"
    _www_rules(rules)
    assert learned.changed(force=True) == []
    assert learned.skipped[alias][1] == f"{B}/p/5/"


def test_a_rule_stopped_while_its_site_calibrates_gives_back_when_that_lands() -> None:
    """A content counterexample may be chance a calibration in flight will show
    (``reconsider``): what the rule kept is not given back (and fetched) while a
    calibration of its site is in flight; once it lands, what still does not hold
    comes back, exactly."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    replies = [Request(f"{B}/p/5/?replytocom={i}") for i in range(1, 4)]
    assert all(df.request_seen(r) for r in replies)
    rules.calibration.asked(f"{B}/p/3/")  # a calibration of the site is in flight
    rules.observe_content(f"{B}/p/3/", D(3))
    rules.observe_content(f"{B}/p/3/?replytocom=1", D(33))  # the rule stops
    assert [param for _, param in rules.host_rules(B + "/")] == ["utm_source"]
    assert learned.changed() == []
    assert len(learned.skipped) == 3
    assert not rules.calibration.unsettled("http://other.test/")
    rules.calibration.answered(f"{B}/p/3/")  # landed: the difference stands
    back = learned.changed(force=True)
    assert sorted(r.url for r in back) == sorted(r.url for r in replies)
    assert learned.skipped == {}


def test_at_the_close_folders_are_those_of_the_resources() -> None:
    """:meth:`Learned.unstood` samples a rule once per folder no page confirmed it
    in, the folder of the key under the rules now: ``/index.php/p/5/`` is a page of
    ``/p`` (where drop-script:index.php and drop-param:replytocom were confirmed),
    not of a folder ``/index.php/p`` of its own."""
    rules, df = learned_filter()
    learned = df.learned
    assert learned is not None
    scheduled(df, f"{B}/index.php/p/5/")  # holds its key while no script rule is known
    alias = f"{B}/index.php/p/5/?replytocom=1"
    assert df.request_seen(Request(alias))  # kept as a duplicate of /index.php/p/5/
    for n in (1, 2):  # then drop-script:index.php is learned, confirmed in /p
        rules.observe_content(f"{B}/index.php/p/{n}/", D(n))
    assert rules.apply(alias) == f"{B}/p/5/"
    learned.observe_content(f"{B}/p/5/", D(5))
    assert learned.unstood() == []
    assert alias in learned.skipped


def test_an_alias_of_a_page_in_flight_waits_once_its_confirmations_fly() -> None:
    """The first links of a site are all scheduled at once: ``/p/n/`` and
    ``/p/n/?utm_source=x`` fly together before any page is served. Two such aliases
    (the confirmations drop-param:utm_source needs) are fetched; the third waits
    (deferred) for the rule to be decided, then is merged, where it was fetched."""
    rules = ProtocolRules()
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    verdicts = []
    for n in (1, 2, 3):
        page = scheduled(df, f"{B}/p/{n}/")
        assert not learned.stale(page) and not learned.defer(page)  # in flight
        alias = scheduled(df, f"{B}/p/{n}/?utm_source=x")
        verdicts.append(learned.stale(alias) or learned.defer(alias))
    assert verdicts == [False, False, True]
    for n in (1, 2):  # the first two pairs are served: the rule is in force
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?utm_source=x{n}", D(n))
    rules.observe_content(f"{B}/p/3/", D(3))
    assert rules.apply(f"{B}/p/3/?utm_source=x") == f"{B}/p/3/"
    assert learned.settle() == []
    assert f"{B}/p/3/?utm_source=x" in learned.skipped
    assert rules.events["deferred_merged"] == 1


def test_an_alias_is_confirmed_through_a_rule_in_force() -> None:
    """remove-www in force, and the ``www.`` twin links every post with a session id:
    ``www.h/p/n/?sid=a`` serving the content of ``h/p/n/`` confirms the twin's
    drop-param:sid (its image ``www.h/p/n/`` is ``h/p/n/`` under remove-www), in
    either order, one alias per post; it took two session ids of one post."""
    sid = (W, "drop-param", "sid")
    for alias_first in (False, True):
        rules = ProtocolRules()
        for path in ("/", "/about/"):
            rules.observe_content(f"{B}{path}", D(hash(path) & 0xFFFF))
            rules.observe_content(f"{W}{path}", D(hash(path) & 0xFFFF))
        rules.observe_content(f"{W}/?sid=a", D(hash("/") & 0xFFFF))  # nominated
        assert rules.needed(sid) == 1
        pages = [(f"{B}/p/1/", D(1)), (f"{W}/p/1/?sid=b", D(1))]  # (another value)
        for uri, digest in reversed(pages) if alias_first else pages:
            rules.observe_content(uri, digest)
        assert rules.needed(sid) == 0, alias_first
        assert rules.apply(f"{W}/p/9/?sid=c") == f"{B}/p/9/"
        rules.observe_content(f"{B}/p/3/", D(3))
        rules.observe_content(f"{W}/p/3/?sid=q", D(33))  # another page: refuted
        assert rules.apply(f"{W}/p/9/?sid=c") == f"{B}/p/9/?sid=c"


def test_a_kept_request_a_further_rule_merges_onto_a_page_served_stays_kept() -> None:
    """``?id=1&sid=b&ref=l1`` kept as a duplicate of ``?id=1&ref=l1`` (drop-param:sid;
    its holder ``?id=1&sid=a&ref=l1`` served); once drop-param:ref holds too, its key
    is ``?id=1``, a key the filter never had, but the page served under the holder
    is that key's page: kept again, where it was given back and fetched (ten items
    of the held-out shop, each time the canonical rule came into force)."""
    S = "http://shop.test"  # noqa: N806
    rules = ProtocolRules()
    for n in (7, 8):
        rules.observe_content(f"{S}/i?id={n}&ref=l1", D(n))
        rules.observe_content(f"{S}/i?id={n}&sid=x{n}&ref=l1", D(n))
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    holder = scheduled(df, f"{S}/i?id=1&sid=a&ref=l1")
    assert not learned.stale(holder) and not learned.defer(holder)
    learned.observe_content(holder.url, D(1))
    learned.fetched(holder)
    alias = f"{S}/i?id=1&sid=b&ref=l1"
    assert df.request_seen(Request(alias))
    assert learned.skipped[alias][1] == f"{S}/i?id=1&ref=l1"
    for n in (7, 8):  # drop-param:ref learned
        rules.observe_content(f"{S}/i?id={n}", D(n))
        rules.observe_content(f"{S}/i?id={n}&ref=l{n}", D(n))
    assert rules.apply(alias) == f"{S}/i?id=1"
    assert learned.changed(force=True) == []
    assert learned.skipped[alias][1] == f"{S}/i?id=1"
