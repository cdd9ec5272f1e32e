"""A response as the spider will get it, for content evidence taken before decompression.

The protocol middleware sits at 650: it must see a redirect before Scrapy's
``RedirectMiddleware`` (600) follows it, so it also sees a 2xx body before
``HttpCompressionMiddleware`` (590) decodes it. Compressed bytes make every content
comparison fail on a site that compresses (most do), so nothing would be learned
there. :func:`decoded` gives the evidence what the spider gets: the body decoded
(``Content-Encoding`` gzip and deflate, with the standard library's zlib, as Scrapy
decodes them), no larger than ``DOWNLOAD_MAXSIZE``, as an HTML, XML or text response
when its ``Content-Type`` says so; the response itself is left as it is for the
middlewares below.
Any other encoding (br, zstd: their packages are optional dependencies of Scrapy's,
not ours), a broken or truncated stream, or a body past the bound gives None: no
content evidence from that response, never a comparison of raw bytes.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from scrapy.http import HtmlResponse, TextResponse, XmlResponse

if TYPE_CHECKING:
    from scrapy.http import Response

__all__ = ["decoded"]

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # the gzip wrapper
_ZLIB_WBITS = zlib.MAX_WBITS  # deflate as sent: a zlib stream ...
_RAW_WBITS = -zlib.MAX_WBITS  # ... or, from some servers, a raw one


def _inflate(body: bytes, wbits: int, max_size: int) -> bytes:
    """*body* decompressed (every concatenated member), at most *max_size* bytes."""
    out: list[bytes] = []
    size = 0
    data = body
    while data:
        engine = zlib.decompressobj(wbits)
        chunk = engine.decompress(data, max_size + 1 - size if max_size else 0)
        size += len(chunk)
        out.append(chunk)
        if max_size and size > max_size:
            raise ValueError("past DOWNLOAD_MAXSIZE")
        if engine.unconsumed_tail:  # the output bound reached with input left over
            raise ValueError("past DOWNLOAD_MAXSIZE")
        if not engine.eof:
            raise zlib.error("truncated stream")  # part of a page is no evidence of it
        data = engine.unused_data
    return b"".join(out)


def _decode(body: bytes, encoding: bytes, max_size: int) -> bytes | None:
    if encoding in (b"gzip", b"x-gzip"):
        return _inflate(body, _GZIP_WBITS, max_size)
    if encoding == b"deflate":
        try:
            return _inflate(body, _ZLIB_WBITS, max_size)
        except zlib.error:
            return _inflate(body, _RAW_WBITS, max_size)
    if encoding != b"identity":
        return None
    if max_size and len(body) > max_size:
        raise ValueError("past DOWNLOAD_MAXSIZE")
    return body


def decoded(response: Response, max_size: int) -> Response | None:
    """*response* with its body decoded as ``HttpCompressionMiddleware`` will decode it
    (the last encoding applied first, RFC 9110 8.4), *response* itself when it has no
    ``Content-Encoding``, or None when it cannot be decoded (an unknown or broken
    encoding, or more than *max_size* bytes; 0 is no bound)."""
    encodings = [token.strip().lower() for value in response.headers.getlist(b"Content-Encoding")
                 for token in value.split(b",") if token.strip()]
    if not encodings:
        return response
    body = response.body
    try:
        for encoding in reversed(encodings):
            step = _decode(body, encoding, max_size)
            if step is None:
                return None
            body = step
    except (zlib.error, ValueError):
        return None
    headers = response.headers.copy()
    del headers[b"Content-Encoding"]
    ctype = (headers.get(b"Content-Type") or b"").lower()
    cls: type[Response] = (HtmlResponse if b"html" in ctype else XmlResponse if b"xml" in ctype
                           else TextResponse if ctype.startswith(b"text/") else type(response))
    return response.replace(cls=cls, body=body, headers=headers)
