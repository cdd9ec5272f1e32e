"""``spider.state`` kept in the ``JOBDIR`` frontier store at each commit, as JSON data.

Scrapy's ``SpiderState`` extension pickles ``spider.state`` to ``<JOBDIR>/spider.state``
only when the spider closes cleanly, so after ``kill -9`` a resumed crawl gets the
state of the last clean close (or none) while the pages answered since are not
fetched again.  :class:`SpiderStateKeeper` writes the state as JSON text into the
frontier store in each commit (the transaction that also answers requests), and
on a run that follows an unclean one (or finds no ``spider.state``) restores it
after ``SpiderState`` loaded its file.  JSON, never pickle: nothing read from
storage runs code.  A state that does not survive a JSON round trip (a set, a
tuple, an int key, an object) gets one WARNING and Scrapy's behaviour.
Design: docs/jobdir.md, "spider.state".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iri_scrapy.frontier.sqlite_store import FrontierStore

logger = logging.getLogger(__name__)

#: Scrapy's ``SpiderState`` file in ``JOBDIR``.
STATE_FILENAME = "spider.state"


class SpiderStateKeeper:
    """Takes ``spider.state`` into the store before each commit (see the module)."""

    def __init__(self, store: Callable[[], FrontierStore | None]) -> None:
        self._store = store
        self._last: str | None = None
        #: False once the state could not be kept as JSON (Scrapy's pickle then).
        self.keeping = True

    def restore(self, spider: Any, jobdir: str, *, unclean: bool) -> bool:
        """Set ``spider.state`` from the store when it is newer than Scrapy's file: the
        last run did not close cleanly, or there is no file.  True if restored."""
        store = self._store()
        if store is None:
            return False
        text = store.spider_state()
        if not text or not (unclean or not Path(jobdir, STATE_FILENAME).exists()):
            return False
        state = json.loads(text)
        if not isinstance(state, dict):
            return False
        spider.state = state
        self._last = text
        if state:
            logger.info("spider.state restored from the frontier store (%d keys)", len(state),
                        extra={"spider": spider})
        return True

    def save(self, spider: Any) -> None:
        """Record ``spider.state`` in the open transaction if it changed."""
        store = self._store()
        state = getattr(spider, "state", None)
        if store is None or not self.keeping or not isinstance(state, dict):
            return
        try:
            text = json.dumps(state, ensure_ascii=False, allow_nan=False)
            same = json.loads(text) == state if text != self._last else True
        except (TypeError, ValueError, RecursionError) as exc:
            same, text, why = False, "", str(exc)
        else:
            why = "it changes in a JSON round trip (a tuple, a set or a non-string key)"
        if text == self._last:
            return
        if not same:
            self.keeping = False
            store.set_spider_state("")
            logger.warning(
                "spider.state cannot be kept as JSON data in the frontier store (%s): it "
                "is saved by Scrapy at a clean close only, so after a kill the resumed "
                "crawl gets the state of the last clean close", why,
                extra={"spider": spider})
            return
        self._last = text
        store.set_spider_state(text)
