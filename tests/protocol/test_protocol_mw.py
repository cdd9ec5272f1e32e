"""IRIProtocolMiddleware with the crawler's fingerprinter: learned rules as keys (RFC 3987 5.3.4).

Each redirect goes through the middleware as in a crawl: ``process_response``
sees the 301 (the observation waits in the redirected request's meta), then
``process_request`` sees the redirected request once it has met the dupefilter
(the rule is learned).  The keys are the crawler's own fingerprinter's, which
shares the middleware's :class:`~iri_scrapy.ProtocolRules`.
"""

from __future__ import annotations

from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from iri_scrapy import IRIRequestFingerprinter
from iri_scrapy.protocol.middleware import META_PENDING, IRIProtocolMiddleware

ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol"}
H = "http://www.example.test"


class _Spider(Spider):
    name = "protocol"


class Crawl:
    """The middleware and fingerprinter of one crawler, driven as a crawl drives them."""

    def __init__(self) -> None:
        self.crawler = get_crawler(_Spider, ADDON)
        self.mw = IRIProtocolMiddleware.from_crawler(self.crawler)
        fingerprinter = self.crawler.request_fingerprinter
        assert isinstance(fingerprinter, IRIRequestFingerprinter)
        self.fp = fingerprinter
        assert self.mw.rules is not None and self.fp.rules is self.mw.rules

    def redirect(self, path: str, location: str, status: int = 301) -> None:
        req = Request(H + path)
        resp = HtmlResponse(req.url, status=status, request=req, headers={"Location": location})
        assert self.mw.process_response(req, resp) is resp
        assert META_PENDING in req.meta
        followed = Request(H + location, meta=dict(req.meta))  # RedirectMiddleware copies meta
        self.mw.process_request(followed)
        assert META_PENDING not in followed.meta

    def served(self, path: str) -> None:
        req = Request(H + path)
        # (each path its own page: one served with another's content is dropped)
        resp = HtmlResponse(req.url, status=200, request=req,
                            body=f"<p>page {path}</p>".encode())
        assert self.mw.process_response(req, resp) is resp

    def key(self, path: str) -> str:
        return self.fp.key_url(Request(H + path))

    def stat(self, name: str) -> int:
        return int(self.crawler.stats.get_value(f"iri/protocol/{name}", 0))


def test_exact_rule_beats_the_opposite_host_rule() -> None:
    """Issue 23's defect: /b, /c -> slash (host rule), then /a/ -> /a."""
    c = Crawl()
    c.redirect("/b", "/b/")
    c.redirect("/c", "/c/")
    assert c.key("/z") == H + "/z/"  # two confirmations: the host rule is in force
    c.redirect("/a/", "/a")
    assert c.key("/a") == c.key("/a/") == H + "/a"  # not /a/, the spelling redirected away
    assert c.key(c.key("/a")[len(H):]) == H + "/a"  # a fixed point
    assert c.key("/z") == H + "/z"  # /a/ -> /a contradicts add-slash on this host
    assert c.key("/b") == H + "/b/"  # exact rules stay
    assert (c.stat("learned"), c.stat("redirects"), c.stat("revoked")) == (3, 3, 0)


def test_latest_evidence_wins_and_is_counted() -> None:
    c = Crawl()
    c.redirect("/a", "/a/")
    assert c.key("/a") == c.key("/a/") == H + "/a/"
    c.redirect("/a/", "/a")  # the server changed its mind: the pair stays one key
    assert c.key("/a") == c.key("/a/") == H + "/a"
    assert (c.stat("learned"), c.stat("revoked")) == (2, 1)
    c.served("/a/")  # now served as it is: the rule from it goes
    assert c.key("/a/") == H + "/a/" != c.key("/a")
    assert (c.stat("revoked"), c.stat("contrary")) == (2, 1)
    c.served("/a")  # no rule from /a: nothing revoked
    assert (c.stat("revoked"), c.stat("contrary")) == (2, 2)


def test_temporary_redirects_teach_nothing() -> None:
    c = Crawl()
    c.redirect("/a", "/a/", status=302)
    c.redirect("/b", "/b/", status=307)
    assert c.key("/a") == H + "/a"
    assert (c.stat("learned"), c.stat("redirects")) == (0, 2)


def test_each_kind_is_counted_and_generalized_per_host() -> None:
    """Issue 23, evidence source 1: a parameter dropped, ``index.*`` removed, the
    ``www.`` label and http -> https, each learned exactly at once and host-wide at
    ``IRI_PROTOCOL_MIN_EVIDENCE`` (2) confirmations; a 2xx in its scope revokes it."""
    c = Crawl()
    c.redirect("/a?replytocom=1", "/a")
    assert c.key("/z?replytocom=9") == H + "/z?replytocom=9"  # one confirmation
    c.redirect("/b?replytocom=2&p=1", "/b?p=1")
    assert c.key("/z?replytocom=9") == H + "/z"
    assert c.key("/z?sort=1") == H + "/z?sort=1"  # another parameter
    c.redirect("/x/index.php", "/x/")
    c.redirect("/index.php", "/")
    assert c.key("/y/index.php?replytocom=3") == H + "/y/"
    assert c.stat("redirect/drop-param/learned") == c.stat("redirect/drop-index/learned") == 2
    c.served("/c?replytocom=1")  # served as it is: a counterexample
    assert c.key("/z?replytocom=9") == H + "/z?replytocom=9"
    assert c.key("/a?replytocom=1") == H + "/a"  # exact rules stay
    c.served("/a?replytocom=1")  # ... until their source is served
    assert c.key("/a?replytocom=1") == H + "/a?replytocom=1"
    assert c.stat("redirect/drop-param/revoked") == c.stat("revoked") == 1


def test_protocol_mw_canonicalizes_location() -> None:
    crawler = get_crawler(settings_dict={**ADDON, "IRI_LEVEL": "protocol"})
    mw = IRIProtocolMiddleware.from_crawler(crawler)
    req = Request("http://www.example.test/a")
    resp = HtmlResponse(req.url, status=301, request=req,
                        headers={"Location": "http://straße.example/x/../y".encode()})
    out = mw.process_response(req, resp)
    assert out.headers[b"Location"] == b"http://xn--strae-oqa.example/y"
    assert "iri_pending_redirect" in req.meta  # learned once the target met the dupefilter
    slash = Request("http://www.example.test/docs")
    mw.process_response(slash, HtmlResponse(slash.url, status=301, request=slash,
                                            headers={"Location": "/docs/"}))
    target = slash.replace(url="http://www.example.test/docs/")
    assert mw.process_request(target) is None
    assert mw.rules is not None and mw.rules.apply("http://www.example.test/docs") == (
        "http://www.example.test/docs/"
    )


def test_dropped_requests_are_listened_to_from_the_first_redirect() -> None:
    """A page's links are mostly duplicates the scheduler drops: no handler of
    ``request_dropped`` (a dispatch per drop) until a redirect is to be learned
    from a request that may be dropped; then the dropped one teaches it."""
    from pydispatch import dispatcher
    from scrapy import signals

    crawl = Crawl()

    def listening() -> bool:
        return crawl.mw.request_dropped in dispatcher.liveReceivers(dispatcher.getAllReceivers(
            crawl.crawler.signals.sender, signals.request_dropped))

    crawl.served("/p")
    assert not listening()
    req = Request(H + "/b")
    resp = HtmlResponse(req.url, status=301, request=req, headers={"Location": "/b/"})
    assert crawl.mw.process_response(req, resp) is resp
    assert listening()
    dropped = Request(H + "/b/", meta=dict(req.meta))  # RedirectMiddleware copies meta
    crawl.crawler.signals.send_catch_log(signals.request_dropped, request=dropped,
                                         spider=None)
    assert crawl.mw.rules is not None and crawl.mw.rules.apply(H + "/b") == H + "/b/"
