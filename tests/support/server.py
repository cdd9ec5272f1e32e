"""A local forward proxy that serves every host of a :class:`~tests.support.site.Site`.

The server is an *independent oracle*: it maps a request target to a resource the
way an ordinary web server does, with its own small code (it must not import the
``iri_scrapy`` core):

* host: %-decoded, lowercased, trailing dot and ``:80`` dropped, then turned into
  its A-label with ``idna`` (IDNA 2008 + UTS 46), so Unicode and punycode hosts
  are the same host; any other port is an unknown host;
* path and query: see :func:`normalize_component` (unreserved escapes decoded,
  UTF-8 escapes decoded, ``%hh`` case ignored, reserved escapes such as ``%2F``
  kept as data); the path also gets RFC 3986 section 5.2.4 dot-segment removal;
* ``?`` with an empty query is not the same as no ``?``.

Use it as a context manager::

    with serve_site(DEMO_SITE) as srv:
        ...  # send requests through srv.proxy_url; inspect srv.hits

or standalone: ``python -m tests.support.server --port 8080``.

Control endpoints (origin-form requests to ``127.0.0.1:PORT`` itself, not recorded):
``GET /_iri_scrapy/hits`` returns the hit log as JSON, ``GET /_iri_scrapy/reset``
clears it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import string
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from urllib.parse import unquote

import idna

from tests.support.localsite import LocalServer, LocalSite, Log, ProxyHandler
from tests.support.site import DEMO_SITE, ResourceKey, Site, remove_dot_segments

__all__ = [
    "Hit",
    "HitLog",
    "SiteServer",
    "host_to_alabel",
    "main",
    "normalize_component",
    "remove_dot_segments",
    "resolve_target",
    "resolve_url",
    "serve_site",
]

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
RESERVED = frozenset(":/?#[]@!$&'()*+,;=")
_HEX = frozenset(b"0123456789abcdefABCDEF")
CONTROL_PREFIX = "/_iri_scrapy/"
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


# --------------------------------------------------------------------------- resolution


def _flush_utf8(pending: bytearray, out: list[str]) -> None:
    """Decode pending non-ASCII bytes as UTF-8; bytes that are not UTF-8 stay ``%HH``."""
    if not pending:
        return
    for ch in pending.decode("utf-8", errors="surrogateescape"):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(f"%{ord(ch) - 0xDC00:02X}")
        else:
            out.append(ch)
    pending.clear()


def normalize_component(raw: bytes) -> str:
    """Normalize a path or query the way the server compares them.

    * ``%HH`` of an unreserved character is decoded (``%7e`` -> ``~``);
    * ``%HH`` of a reserved character stays escaped, with uppercase hex (``%2f`` -> ``%2F``);
    * escaped or raw bytes >= 0x80 are decoded as UTF-8 (invalid UTF-8 stays ``%HH``);
    * other raw ASCII characters that are neither reserved nor unreserved
      (``"``, ``<``, ...) are escaped, and a ``%`` not followed by two hex digits
      becomes ``%25``.
    """
    out: list[str] = []
    pending = bytearray()
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b == 0x25 and i + 2 < n and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            v = int(raw[i + 1 : i + 3], 16)
            i += 3
            if v >= 0x80:
                pending.append(v)
                continue
            _flush_utf8(pending, out)
            out.append(chr(v) if chr(v) in UNRESERVED else f"%{v:02X}")
            continue
        i += 1
        if b >= 0x80:
            pending.append(b)
            continue
        _flush_utf8(pending, out)
        c = chr(b)
        out.append(c if (c in UNRESERVED or c in RESERVED) else f"%{b:02X}")
    _flush_utf8(pending, out)
    return "".join(out)


def host_to_alabel(authority: str) -> str | None:
    """Turn a request authority into a lowercase A-label host, or None if unusable.

    Userinfo is ignored, ``:80`` (or an empty port) is dropped, any other port
    makes the host unusable; IDNA 2008 + UTS 46 maps U-labels (any case) to A-labels.
    """
    hostport = authority.rpartition("@")[2]
    host, sep, port = hostport.rpartition(":")
    if not sep or "]" in port:
        host, port = hostport, ""
    if port not in ("", "80"):
        return None
    host = unquote(host).rstrip(".").lower()
    if not host:
        return None
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None


def _split_target(raw: bytes, host_header: str | None) -> tuple[str | None, bytes]:
    """Split a request target into (authority, path-and-query) for absolute- or origin-form."""
    if raw[:7].lower() == b"http://":
        rest = raw[7:]
        ends = [i for i in (rest.find(b"/"), rest.find(b"?"), rest.find(b"#")) if i >= 0]
        cut = min(ends) if ends else len(rest)
        return rest[:cut].decode("utf-8", errors="replace"), rest[cut:]
    if host_header is not None:
        # http.server decodes header bytes as latin-1; a raw UTF-8 Host is recovered here.
        with contextlib.suppress(UnicodeError):
            host_header = host_header.encode("latin-1").decode("utf-8")
    return host_header, raw


def resolve_target(target: str | bytes, host_header: str | None = None) -> ResourceKey | None:
    """Resolve an HTTP request target (absolute-form or origin-form + Host) to a key.

    Returns None when the host is missing or unusable (bad port, invalid IDNA).
    The key may name a resource the site does not have (a 404).
    """
    raw = target.encode("latin-1") if isinstance(target, str) else target
    authority, rest = _split_target(raw, host_header)
    if authority is None:
        return None
    host = host_to_alabel(authority)
    if host is None:
        return None
    rest = rest.split(b"#", 1)[0]
    path_b, qmark, query_b = rest.partition(b"?")
    path = remove_dot_segments(normalize_component(path_b)) or "/"
    if not path.startswith("/"):
        path = "/" + path
    query = normalize_component(query_b) if qmark else None
    return ResourceKey(host, path, query)


def resolve_url(url: str) -> ResourceKey | None:
    """Resolve an absolute ``http`` URL or IRI (str; non-ASCII sent as UTF-8) to a key."""
    return resolve_target(url.encode("utf-8"))


# --------------------------------------------------------------------------- hit log


@dataclass(frozen=True)
class Hit:
    """One request the server answered."""

    method: str
    target: str
    host_header: str | None
    key: ResourceKey | None
    status: int
    at: float = field(default_factory=time.monotonic, compare=False)
    """When the request arrived (``time.monotonic()``), for rate measurements."""


class HitLog(Log[Hit]):
    """Thread-safe record of every request, in arrival order."""

    @property
    def hits(self) -> list[Hit]:
        """A copy of all hits, in order."""
        return self.entries()

    @property
    def targets(self) -> list[str]:
        """The raw request targets, in order (raw non-ASCII bytes shown %-escaped)."""
        return [h.target for h in self.hits]

    def counts(self) -> Counter[ResourceKey]:
        """How many times each resolved key was requested (404 keys included)."""
        return Counter(h.key for h in self.hits if h.key is not None)

    def count(self, key: ResourceKey) -> int:
        """How many times *key* was requested."""
        return self.counts()[key]

    def fetched(self) -> frozenset[ResourceKey]:
        """Keys that were answered with 200 or 301."""
        return frozenset(h.key for h in self.hits if h.key is not None and h.status in (200, 301))

    def duplicates(self) -> dict[ResourceKey, int]:
        """Keys requested more than once, with their counts."""
        return {k: n for k, n in self.counts().items() if n > 1}

    def not_found(self) -> list[Hit]:
        """Hits answered 404."""
        return [h for h in self.hits if h.status == 404]

    def to_json(self) -> list[dict[str, object]]:
        """The hits as JSON-ready dicts."""
        return [asdict(h) for h in self.hits]


# --------------------------------------------------------------------------- HTTP


class _Handler(ProxyHandler):
    server_version = "IriAliasWeb/1.0"
    server: LocalServer[SiteServer]
    raw_requestline: bytes

    def parse_request(self) -> bool:
        """%-escape raw non-ASCII bytes of the request line before http.server splits it.

        http.server decodes the line as latin-1 and uses ``str.split()``, which also
        splits on U+0085 and U+00A0 -- bytes that occur inside raw UTF-8 (e.g. "Р").
        The resolver treats raw and %-escaped non-ASCII bytes alike, so nothing is lost.
        """
        line = self.raw_requestline
        if not line.isascii():
            self.raw_requestline = b"".join(
                b"%%%02X" % c if c >= 0x80 else bytes((c,)) for c in line
            )
        return super().parse_request()

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(send_body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(send_body=True)

    def _control(self, send_body: bool) -> bool:
        """Serve the control endpoints; True if the request was one."""
        if not self.path.startswith(CONTROL_PREFIX):
            return False
        host = (self.headers.get("Host") or "").rpartition(":")[0]
        if host not in _LOCAL_HOSTS:
            return False
        action = self.path[len(CONTROL_PREFIX):]
        if action == "reset":
            self.server.owner.hits.reset()
            data: object = {"ok": True}
        elif action == "hits":
            data = self.server.owner.hits.to_json()
        else:
            return False
        body = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self.respond(200, body, "application/json", send_body=send_body)
        return True

    def _answer(self, send_body: bool) -> None:
        if self._control(send_body):
            return
        site = self.server.owner.site
        host_header = self.headers.get("Host")
        key = resolve_target(self.path, host_header)
        res = site.lookup(key) if key is not None else None
        html = "text/html; charset=utf-8"
        location = None
        if res is None:
            status = 404
            body = b"<!DOCTYPE html><title>404 Not Found</title><h1>Not Found</h1>\n"
        elif res.redirect_to is not None or res.location is not None:
            status = 301
            location = res.location if res.redirect_to is None else site.get(res.redirect_to).url
            body = f'<!DOCTYPE html><title>Moved</title><a href="{location}">moved</a>\n'.encode()
        else:
            status = 200
            body = site.render(res)
        # Recorded before the answer is sent: a client that has its response (a
        # crawl that has finished) always finds the hit in the log.
        self.server.owner.hits.record(Hit(self.command, self.path, host_header, key, status))
        headers = [] if location is None else [("Location", location)]
        self.respond(status, body, html, headers, send_body)


class SiteServer(LocalSite):
    """The alias web on ``127.0.0.1``, in a daemon thread; a context manager."""

    handler = _Handler
    thread_name = "iri-alias-web"

    def __init__(self, site: Site = DEMO_SITE, port: int = 0, host: str = "127.0.0.1") -> None:
        if host not in _LOCAL_HOSTS:
            raise ValueError("the alias web only listens on the loopback interface")
        super().__init__(port, host)
        self.site = site
        self.hits = HitLog()

    def reset(self) -> None:
        """Clear the hit log."""
        self.hits.reset()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (used by ``main``)."""
        self.bind()
        assert self._httpd is not None
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()
            self._httpd = None


def serve_site(site: Site = DEMO_SITE, port: int = 0) -> SiteServer:
    """Return a (not yet started) server for *site*; use ``with serve_site(site) as srv:``."""
    return SiteServer(site, port)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo alias web until killed; print its proxy URL first."""
    parser = argparse.ArgumentParser(description="Serve the iri_scrapy demo alias web.")
    parser.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    args = parser.parse_args(argv)
    srv = SiteServer(DEMO_SITE, args.port).bind()
    print(srv.proxy_url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
