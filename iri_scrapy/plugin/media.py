"""Media pipelines that name a stored file by its resource, not by the spelling met first.

Scrapy's ``FilesPipeline`` and ``ImagesPipeline`` store a file under the SHA-1
of ``request.url`` (``full/<sha1>.<ext>``).  With the plugin a resource is
downloaded once per crawl whatever its spelling (the fingerprinter merges
them), but the name comes from the first spelling met: a second run that
meets another spelling first (``http://files.test:80/a.pdf`` instead of
``http://files.test/a.pdf``) does not find the stored file, downloads it again
and stores it under another name.

:class:`IRIFilesPipeline` and :class:`IRIImagesPipeline` override the
documented ``file_path()`` (and ``thumb_path()``) to hash the resource's
canonical retrieval key instead (:func:`iri_scrapy.retrieval_key`: level
SCHEME of RFC 3987 section 5.3, URI form, fragment dropped): every spelling of
a resource gets the same stored path, run after run; distinct resources
(``/a%2Fb`` and ``/a/b``, ``/f?`` and ``/f``) keep distinct paths.  A URL with
no canonical form is named as Scrapy names it.  The ``IRI_*`` options (level,
heuristics) do not change paths, so changing them does not orphan stored files.

The add-on puts them in place of the stock classes listed in ``ITEM_PIPELINES``
(same priority) unless ``IRI_MEDIA_PIPELINES = False``; subclasses of the stock
classes are left alone (they may name files their own way: subclass ours).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.pipelines.files import FilesPipeline
from scrapy.pipelines.images import ImagesPipeline

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import retrieval_key
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import META_VERBATIM

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

__all__ = ["IRIFilesPipeline", "IRIImagesPipeline"]


def keyed_request(request: Request) -> Request:
    """*request* at its canonical retrieval key (itself if it is one or has none)."""
    try:
        key = retrieval_key(request.url)
    except IRIError:
        return request
    if key == request.url:
        return request
    # verbatim_url: Request() would drop a bare "?" (another resource)
    return request.replace(url=key, meta={**request.meta, META_VERBATIM: True})


class IRIFilesPipeline(FilesPipeline):
    """``FilesPipeline`` storing each resource under one path (see the module docstring)."""

    def file_path(
        self, request: Request, response: Response | None = None, info: Any = None,
        *, item: Any = None,
    ) -> str:
        """Scrapy's path, computed from the canonical retrieval key of *request*'s URL."""
        return super().file_path(keyed_request(request), response, info, item=item)


class IRIImagesPipeline(ImagesPipeline):
    """``ImagesPipeline`` storing each resource (and its thumbnails) under one path."""

    def file_path(
        self, request: Request, response: Response | None = None, info: Any = None,
        *, item: Any = None,
    ) -> str:
        """Scrapy's path, computed from the canonical retrieval key of *request*'s URL."""
        return super().file_path(keyed_request(request), response, info, item=item)

    def thumb_path(
        self, request: Request, thumb_id: str, response: Response | None = None,
        info: Any = None, *, item: Any = None,
    ) -> str:
        """Scrapy's thumbnail path, from the canonical retrieval key of *request*'s URL."""
        return super().thumb_path(keyed_request(request), thumb_id, response, info, item=item)
