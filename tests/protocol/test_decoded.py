"""The protocol evidence reads a 2xx body as the spider will get it (protocol/decoded.py):
decoded as HttpCompressionMiddleware decodes it, bounded, the response left as it is."""

from __future__ import annotations

import gzip
import zlib

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from iri_scrapy.protocol.decoded import decoded

PAGE = b"<!DOCTYPE html><html><head><title>t</title></head><body><p>caf\xc3\xa9</p></body></html>"
URL = "http://a.test/x"


def _raw_deflate(data: bytes) -> bytes:
    engine = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return engine.compress(data) + engine.flush()


ENCODED = [  # (Content-Encoding, body on the wire), section: RFC 9110 8.4.1
    (b"gzip", gzip.compress(PAGE, mtime=0)),
    (b"x-gzip", gzip.compress(PAGE, mtime=0)),
    (b"deflate", zlib.compress(PAGE)),
    (b"deflate", _raw_deflate(PAGE)),
    (b"gzip, deflate", zlib.compress(gzip.compress(PAGE, mtime=0))),
    (b"GZIP", gzip.compress(PAGE, mtime=0)),
    (b"identity", PAGE),
]


def _response(encoding: bytes | None, body: bytes) -> Response:
    """As the downloader builds it: its class from the Content-Type."""
    headers = {"Content-Type": "text/html; charset=utf-8"}
    if encoding is not None:
        headers["Content-Encoding"] = encoding.decode()
    return HtmlResponse(URL, body=body, headers=headers)


@pytest.mark.parametrize(("encoding", "body"), ENCODED, ids=[f"{e.decode()}-{i}" for i, (e, _) in enumerate(ENCODED)])
def test_decoded_as_scrapy_decodes_it_and_left_as_it_was(encoding: bytes, body: bytes) -> None:
    response = _response(encoding, body)
    page = decoded(response, 0)
    assert page is not None and page.body == PAGE and isinstance(page, HtmlResponse)
    assert b"Content-Encoding" not in page.headers and "café" in page.text
    # the response the middlewares below get is untouched
    assert response.body == body and response.headers.get(b"Content-Encoding") == encoding
    crawler = get_crawler()
    scrapy_page = HttpCompressionMiddleware.from_crawler(crawler).process_response(
        Request(URL), _response(encoding, body))
    assert scrapy_page.body == page.body and type(scrapy_page) is type(page)


def test_no_encoding_is_the_response_itself() -> None:
    response = _response(None, PAGE)
    assert decoded(response, 0) is response


@pytest.mark.parametrize(("encoding", "body"), [
    (b"gzip", b"not gzip at all"), (b"gzip", gzip.compress(PAGE, mtime=0)[:20]), (b"compress", PAGE),
    (b"br", PAGE),
    (b"deflate", b"\x00\x01\x02"), (b"gzip", gzip.compress(PAGE * 100, mtime=0)),
])
def test_what_cannot_be_decoded_within_the_bound_is_no_evidence(encoding: bytes,
                                                                 body: bytes) -> None:
    assert decoded(_response(encoding, body), len(PAGE) * 10) is None


def test_a_bomb_stops_at_the_bound() -> None:
    bomb = gzip.compress(b"\x00" * 50_000_000, mtime=0)
    assert len(bomb) < 100_000
    assert decoded(_response(b"gzip", bomb), 1_000_000) is None
