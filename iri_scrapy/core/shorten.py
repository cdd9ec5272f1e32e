"""Long URLs in messages: one rule for every log line and error message.

A crawl may meet URLs of hundreds of kilobytes (a data: URI, a query built by a
script gone wrong); quoting one in full makes a log line nobody can read.
:func:`shorten` keeps the first :data:`SHOWN_LENGTH` characters and says how long
the whole is.  Pure: no I/O.
"""

from __future__ import annotations

#: How many characters of a URL a message quotes.
SHOWN_LENGTH = 200


def shorten(text: str, limit: int = SHOWN_LENGTH) -> str:
    """*text* if it has at most *limit* characters, else its first *limit* characters,
    an ellipsis and the full length: ``"http://a/xxxx…(612,345 characters)"``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026({len(text):,} characters)"
