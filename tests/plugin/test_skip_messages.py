"""What the log says of a skipped link: a clear line, never a 600 KB one.

``request_refusal`` asks Scrapy's real ``Request()``; ``report_skipped`` logs
through the real ``logging`` (captured by caplog).
"""

from __future__ import annotations

import logging

import pytest

from iri_scrapy.core.shorten import SHOWN_LENGTH
from iri_scrapy.plugin.links import report_skipped, request_refusal


@pytest.mark.parametrize(("url", "scheme"), [("mailto:someone@example.test", "mailto"),
                                              ("tel:+4912345", "tel"),
                                              ("javascript:void(0)", "javascript")])
def test_a_url_scrapy_does_not_request_is_named_for_what_it_is(url: str, scheme: str) -> None:
    refusal = request_refusal(url)
    assert refusal is not None
    reason, message = refusal
    assert reason == "scheme"
    assert message == (f"a {scheme}: URL, which Scrapy does not request (no '//' after the "
                       "scheme)")
    assert "Missing scheme" not in message


def test_skipped_link_log_line_is_clear_and_short(caplog: pytest.LogCaptureFixture) -> None:
    href = "mailto:someone@example.test"
    reason, message = request_refusal(href) or ("", "")
    long_href = "http://[::1/" + "a" * 600_000
    long_reason, long_message = request_refusal(long_href) or ("", "")
    with caplog.at_level(logging.DEBUG, logger="iri_scrapy.plugin.links"):
        report_skipped(None, "http://page.test/", href, reason, message)
        report_skipped(None, "http://page.test/", long_href, long_reason, long_message)
    first, second = (r.getMessage() for r in caplog.records[-2:])
    assert "'mailto:someone@example.test' (scheme: a mailto: URL, which Scrapy does not " \
           "request (no '//' after the scheme))" in first
    assert len(second) < 2 * SHOWN_LENGTH + 400
    assert "(600,012 characters)" in second
