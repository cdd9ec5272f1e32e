"""The frontier's request records: requests stored as data, read back without running code.

Both schedulers (:mod:`.jobdir`, :mod:`.redis_scheduler`) store pending requests
outside the process: the ``JOBDIR`` SQLite store, the Redis queue and the
workers' intents.  Whoever can write there must not be able to run code in the
crawler, so a record is *data* (see ``docs/frontier.md``):

**A JSON record** (the normal case): Scrapy's public ``Request.to_dict(spider=...)``
(callbacks and errbacks by name, as Scrapy's own disk queues keep them) as JSON
with a version field ``"v"``; ``bytes`` (headers, body, or in ``meta``) are the
tag ``{"$b": "<base64>"}`` (a dict of one key ``"$b"`` or ``"$d"`` written by the
spider is escaped as ``{"$d": {...}}``); the class, if not ``Request``, is
``"<module>.<qualname>"``.  Reading one back is ``json.loads``, a strict check of
every field's type, then Scrapy's public
:func:`~scrapy.utils.request.request_from_dict`, and only after

* the class path names a ``scrapy.Request`` subclass *already loaded* in this
  process (looked up among ``Request``'s subclasses, recursively, by
  ``module.qualname``; the class object itself is handed to
  ``request_from_dict``, so no module named by stored data is ever imported);
* the callback and errback names are methods of this spider.

**A signed pickle**: a request whose ``meta``, ``cb_kwargs`` or other attributes
hold values that are not plain JSON data (str, int, float, bool, None, list,
dict with str keys, bytes) is stored as ``MAGIC + HMAC-SHA256(secret, MAGIC +
pickle) + pickle`` when ``IRI_FRONTIER_SECRET`` (the setting, or the environment
variable of that name) is set; the signature is checked with
:func:`hmac.compare_digest` before anything is unpickled.  Without a secret such a
request raises :class:`UnserializableRequest` at schedule time (the scheduler
keeps it in memory, counts it and says what to do).

Anything else (a bare pickle, garbage, another version, a bad shape, a bad
signature, an unknown class or callback) raises :class:`RefusedRecord`: never
executed.  The schedulers count it, log one ERROR line per kind, keep the
record aside, and the crawl goes on without it but does not end ``finished``:
it closes with ``finish_reason`` :data:`REASON_REFUSED_RECORDS` (exit status 1).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import os
import pickle
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.request import request_from_dict

from iri_scrapy.core.errors import IRIScrapyError
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.refusal import exit_status_one_on

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


logger = logging.getLogger(__name__)

#: The version field (``"v"``) of a JSON record.
VERSION = 1
#: The first bytes of a signed pickle record.
MAGIC = b"iri-signed-pickle-1\n"
SECRET_SETTING = "IRI_FRONTIER_SECRET"
#: ``finish_reason`` of a crawl that had to refuse stored records.
REASON_REFUSED_RECORDS = "iri_frontier_refused_records"

_SIG_LEN = hashlib.sha256().digest_size
_BYTES_TAG = "$b"
_DICT_TAG = "$d"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Why a record was refused, and what to do about it (the ERROR line says both).
KINDS: dict[str, str] = {
    "pickle": "a bare pickle, which is never unpickled (an iri_scrapy before the "
              "JSON records wrote such records; anyone else who can write the store "
              "could plant one to run code): if the crawl was started by an older "
              "iri_scrapy, its pending requests are lost: crawl again with a new store; "
              "otherwise find out who can write to it",
    "garbage": "not a request record (neither JSON nor a signed pickle): find out who "
               "or what writes to the store",
    "version": "a JSON record of another version: written by another iri_scrapy "
               "version; finish that crawl with the version that started it",
    "shape": "a JSON record whose fields have the wrong types or names: not written by "
             "iri_scrapy; find out who can write to the store",
    "signature": "a signed pickle whose HMAC does not match (IRI_FRONTIER_SECRET differs "
                 "from the one it was written with, is not set, or the record was "
                 "forged): it was not unpickled; give every worker the same secret",
    "class": "a request class that is not a scrapy.Request subclass loaded in this "
             "process (nothing is imported for a stored record): import the module "
             "that defines it in the spider's module, or find out who wrote it",
    "callback": "a callback or errback that is not a method of this spider (renamed "
                "since the request was stored, or forged): those pages were not "
                "fetched; restore the method name, or find out who wrote it",
}


class RefusedRecord(IRIScrapyError):
    """A stored record that is not read back (never executed); *kind* is a key of
    :data:`KINDS`."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class UnserializableRequest(IRIScrapyError):
    """A request that cannot be stored; the message says why and what to do."""


class _NotPlain(IRIScrapyError):
    """A value that is not plain JSON data: *what* it is, at *path* in the record (the
    path is built on the way out, so that encoding plain data builds none)."""

    def __init__(self, what: str, path: str = "") -> None:
        super().__init__(what, path)
        self.what = what
        self.path = path

    def inside(self, step: str) -> _NotPlain:
        """The same, one level up: *step* (a field name, ``[i]``, ``['key']``) first."""
        return _NotPlain(self.what, step + self.path)

    def __str__(self) -> str:
        return f"{self.path} {self.what}"


def frontier_secret(settings: BaseSettings | None) -> bytes | None:
    """``IRI_FRONTIER_SECRET``: the setting, else the environment variable; ``None`` if
    neither is set (or is empty)."""
    value: Any = settings.get(SECRET_SETTING) if settings is not None else None
    if value is None or value == "":
        value = os.environ.get(SECRET_SETTING) or None
    if value is None:
        return None
    if isinstance(value, bytes):
        return value or None
    return str(value).encode("utf-8") or None


def request_class(path: str) -> type[Request] | None:
    """The ``scrapy.Request`` (sub)class already loaded whose ``module.qualname`` is
    *path*; ``None`` if there is none, or more than one.  Never imports anything."""
    found: list[type[Request]] = []
    seen: set[type] = set()
    stack: list[type[Request]] = [Request]
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if f"{cls.__module__}.{cls.__qualname__}" == path:
            found.append(cls)
        stack.extend(cls.__subclasses__())
    return found[0] if len(found) == 1 else None


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# --------------------------------------------------------------------------- plain data


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _to_plain(value: Any) -> Any:
    """*value* as JSON data, bytes tagged; :class:`_NotPlain` for anything else.

    Exact types only: a subclass of ``str`` or ``dict`` (an enum, an
    ``OrderedDict``) would come back as its base type, so it is not plain.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is bytes:
        return {_BYTES_TAG: base64.b64encode(value).decode("ascii")}
    if kind is list:
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_to_plain(v))
            except _NotPlain as exc:
                raise exc.inside(f"[{i}]") from None
        return items
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain(f"has the key {k!r} (not a str)")
            try:
                out[k] = _to_plain(v)
            except _NotPlain as exc:
                raise exc.inside(f"[{k!r}]") from None
        if len(out) == 1 and next(iter(out)) in (_BYTES_TAG, _DICT_TAG):
            return {_DICT_TAG: out}
        return out
    raise _NotPlain(f"holds a {kind.__module__}.{kind.__qualname__}")


def _plain_field(value: Any, name: str) -> Any:
    """:func:`_to_plain` of the record's field *name* (named in the error)."""
    try:
        return _to_plain(value)
    except _NotPlain as exc:
        raise exc.inside(name) from None


def _from_plain(value: Any, where: str) -> Any:
    """The inverse of :func:`_to_plain` on ``json.loads`` output; :class:`RefusedRecord`
    (shape) on a malformed tag."""
    if isinstance(value, list):
        return [_from_plain(v, where) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (key, inner), = value.items()
            if key == _BYTES_TAG:
                if not isinstance(inner, str):
                    raise RefusedRecord("shape", f"{where}: a bytes tag without a string")
                try:
                    return base64.b64decode(inner.encode("ascii"), validate=True)
                except (ValueError, UnicodeEncodeError) as exc:
                    raise RefusedRecord("shape", f"{where}: bad base64 ({exc})") from None
            if key == _DICT_TAG:
                if not isinstance(inner, dict):
                    raise RefusedRecord("shape", f"{where}: a dict tag without a dict")
                return {k: _from_plain(v, where) for k, v in inner.items()}
        return {k: _from_plain(v, where) for k, v in value.items()}
    return value  # str, int, float, bool, None: what json.loads makes


# --------------------------------------------------------------------------- the shape

#: Request.to_dict's fields: what type each must have once read back.
_BASE_FIELDS = ("url", "callback", "errback", "headers", "body", "cookies", "meta",
                "encoding", "flags", "cb_kwargs", "dont_filter", "method", "priority")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _check_fields(d: dict[str, Any], *, plain: bool) -> None:
    """The type of every base field (*plain*: headers as pairs; values plain data)."""
    missing = [name for name in _BASE_FIELDS if name not in d]
    if missing:
        raise RefusedRecord("shape", f"missing fields {missing}")

    def bad(name: str, want: str) -> RefusedRecord:
        return RefusedRecord("shape", f"{name} must be {want}, not {type(d[name]).__name__}")

    if type(d["url"]) is not str:
        raise bad("url", "a str")
    for name in ("callback", "errback"):
        if d[name] is not None and type(d[name]) is not str:
            raise bad(name, "a method name or null")
    for name in ("method", "encoding"):
        if type(d[name]) is not str:
            raise bad(name, "a str")
    if type(d["body"]) is not bytes:
        raise bad("body", "bytes")
    if type(d["dont_filter"]) is not bool:
        raise bad("dont_filter", "a bool")
    if not _is_int(d["priority"]):
        raise bad("priority", "an int")
    flags = d["flags"]
    if type(flags) is not list or any(type(f) is not str for f in flags):
        raise bad("flags", "a list of str")
    for name in ("meta", "cb_kwargs"):
        if type(d[name]) is not dict:
            raise bad(name, "a dict")
    if not isinstance(d["cookies"], (dict, list)):
        raise bad("cookies", "a dict or a list")
    headers = d["headers"]
    if plain:
        if type(headers) is not list or not all(
            type(pair) is list and len(pair) == 2 and type(pair[0]) is bytes
            and type(pair[1]) is list and all(type(v) is bytes for v in pair[1])
            for pair in headers
        ):
            raise bad("headers", "a list of [name, [values]] of bytes")
    elif not isinstance(headers, dict):
        raise bad("headers", "a dict")


# --------------------------------------------------------------------------- the codec


class _Methods:
    """Some methods of a spider, and nothing else to list (see ``_request_dict``)."""

    def __init__(self, members: dict[str, Any]) -> None:
        self.__dict__.update(members)

    def __dir__(self) -> list[str]:
        return list(self.__dict__)


class RequestCodec:
    """Encodes requests as records and decodes records as requests of *spider*.

    *secret*: ``IRI_FRONTIER_SECRET`` (:func:`frontier_secret`), for the requests
    whose values are not plain data; ``None``: such requests are not stored.
    """

    def __init__(self, spider: Spider | None, secret: bytes | None = None) -> None:
        self.spider = spider
        self.secret = secret
        #: Whether :meth:`record_or_none` has logged its one warning.
        self.warned_unserializable = False
        #: The spider method name of each function used as a callback or errback.
        self._method_names: dict[Any, str] = {}

    # --- encoding ----------------------------------------------------------------

    def record_or_none(
        self, request: Request, *, drop_meta: tuple[str, ...], count: Callable[[], None],
        log: logging.Logger, store: str, kept: str, stat: str,
    ) -> bytes | None:
        """:meth:`encode`, or ``None`` for a request that cannot be stored as data: then
        *count* is called and, the first time only, *log* says that it is not stored
        in *store* but *kept* (the scheduler keeps it in memory) and which *stat* counts it."""
        try:
            return self.encode(request, drop_meta=drop_meta)
        except UnserializableRequest as exc:
            count()
            if not self.warned_unserializable:
                self.warned_unserializable = True
                log.warning(
                    "Request %(request)s cannot be stored in %(store)s (%(reason)s): %(kept)s "
                    "(counted in %(stat)s; no more such requests will be logged)",
                    {"request": request, "reason": exc, "store": store, "kept": kept,
                     "stat": stat}, extra={"spider": self.spider},
                )
            return None


    def encode(self, request: Request, *, drop_meta: tuple[str, ...] = ()) -> bytes:
        """The record of *request*, without the meta keys *drop_meta*.

        Raises :class:`UnserializableRequest` (a lambda callback, a class that
        cannot be found again, a value that is not plain data without a secret).
        """
        try:
            d = self._request_dict(request)
        except Exception as exc:  # a lambda or a function that is no spider method
            raise UnserializableRequest(
                f"{exc} (callbacks and errbacks must be methods of the spider)") from exc
        meta = d.get("meta")
        if meta and any(k in meta for k in drop_meta):
            d["meta"] = {k: v for k, v in meta.items() if k not in drop_meta}
        cls = type(request)
        d.pop("_class", None)
        if cls is not Request:
            path = _class_path(cls)
            if request_class(path) is not cls:
                raise UnserializableRequest(
                    f"its class {path} cannot be told apart from another loaded class of "
                    "that name (define request classes once, at module level)")
            d["_class"] = path
        d["v"] = VERSION
        try:
            plain = {k: _plain_field(v, k) for k, v in d.items() if k != "headers"}
            headers = d["headers"]
            plain["headers"] = [
                [_plain_field(k, "headers"), _plain_field(list(v), "headers")]
                for k, v in headers.items()
            ]
        except _NotPlain as exc:
            return self._signed(d, str(exc))
        except RecursionError as exc:
            raise UnserializableRequest(f"nested too deeply ({exc})") from None
        return json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def _request_dict(self, request: Request) -> dict[str, Any]:
        """Scrapy's ``Request.to_dict(spider=...)``.  To name a callback, Scrapy lists
        every attribute of the spider it is given, for each request (about half
        the cost of storing one): here it is given only the spider's methods the
        request uses, each found once by the full lookup (and the spider itself
        whenever that does not name them)."""
        spider = self.spider
        members: dict[str, Any] | None = {}
        for func in (request.callback, request.errback):
            if members is not None and callable(func):
                name = self._method_names.get(getattr(func, "__func__", None))
                if name is None:
                    members = None
                else:
                    members[name] = getattr(spider, name, None)
        if members is not None and spider is not None:
            with contextlib.suppress(ValueError):
                return request.to_dict(spider=_Methods(members))  # type: ignore[arg-type]
        d = request.to_dict(spider=spider)
        for key in ("callback", "errback"):
            func = getattr(request, key)
            if callable(func) and getattr(func, "__self__", None) is spider:
                self._method_names[func.__func__] = d[key]
        return d

    def _signed(self, d: dict[str, Any], why: str) -> bytes:
        if self.secret is None:
            raise UnserializableRequest(
                f"{why}, not plain data: make meta and cb_kwargs plain data (str, int, "
                f"float, bool, None, list, dict with str keys, bytes) or set "
                f"{SECRET_SETTING} to store such requests as signed pickles")
        try:
            body = pickle.dumps(d, protocol=4)
        except Exception as exc:
            raise UnserializableRequest(f"{why}, which cannot be pickled ({exc})") from exc
        signature = hmac.new(self.secret, MAGIC + body, hashlib.sha256).digest()
        return MAGIC + signature + body

    # --- decoding ----------------------------------------------------------------

    def decode(self, data: Any) -> Request:
        """The request of the record *data*; :class:`RefusedRecord` if it is not one
        this crawl wrote.  Nothing in *data* is executed or imported."""
        try:
            return self._decode(data)
        except RefusedRecord:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever went wrong: refused
            raise RefusedRecord("shape", f"cannot be read back ({exc!r})") from None

    def _decode(self, data: Any) -> Request:
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, bytes):
            raise RefusedRecord("garbage", f"a {type(data).__name__}, not bytes")
        if data.startswith(MAGIC):
            d = self._unsign(data)
            plain = False
        elif data[:1] == b"{":
            d = self._parse(data)
            plain = True
        elif data[:1] == b"\x80" or data.endswith(b"."):  # PROTO, or ends with STOP
            raise RefusedRecord("pickle", f"{len(data)} bytes starting {data[:16]!r}")
        else:
            raise RefusedRecord("garbage", f"{len(data)} bytes starting {data[:16]!r}")
        return self._build(d, plain=plain)

    def _parse(self, data: bytes) -> dict[str, Any]:
        try:
            loaded = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise RefusedRecord("garbage", f"not JSON ({exc})") from None
        if type(loaded) is not dict:
            raise RefusedRecord("shape", f"a JSON {type(loaded).__name__}, not an object")
        version = loaded.get("v")
        if not _is_int(version) or version != VERSION:
            raise RefusedRecord("version", f"version {version!r}; this iri_scrapy reads {VERSION}")
        try:
            d = {k: (_from_plain(v, k) if k != "headers" else v) for k, v in loaded.items()}
            headers = d.get("headers")
            if type(headers) is list:
                d["headers"] = [_from_plain(pair, "headers") for pair in headers]
        except RecursionError:
            raise RefusedRecord("shape", "nested too deeply") from None
        return d

    def _unsign(self, data: bytes) -> dict[str, Any]:
        signature = data[len(MAGIC):len(MAGIC) + _SIG_LEN]
        body = data[len(MAGIC) + _SIG_LEN:]
        if self.secret is None:
            raise RefusedRecord("signature", f"a signed record, but {SECRET_SETTING} is not set")
        expected = hmac.new(self.secret, MAGIC + body, hashlib.sha256).digest()
        if len(signature) != _SIG_LEN or not hmac.compare_digest(signature, expected):
            raise RefusedRecord("signature", "the HMAC does not match")
        try:  # signed with our secret: written by a process that holds it
            loaded = pickle.loads(body)  # noqa: S301 - authenticated above
        except Exception as exc:
            raise RefusedRecord("garbage", f"a signed record that cannot be unpickled ({exc})"
                                ) from None
        if type(loaded) is not dict or loaded.get("v") != VERSION:
            raise RefusedRecord("version", "a signed record of another version")
        return loaded

    def _build(self, d: dict[str, Any], *, plain: bool) -> Request:
        _check_fields(d, plain=plain)
        path = d.get("_class")
        cls: type[Request] = Request
        if path is not None:
            if type(path) is not str:
                raise RefusedRecord("shape", "_class must be a str")
            found = request_class(path)
            if found is None:
                raise RefusedRecord("class", f"{path!r} is no loaded scrapy.Request subclass")
            cls = found
        allowed = {*_BASE_FIELDS, "v", "_class", *cls.attributes}
        unknown = sorted(set(d) - allowed)
        if unknown:
            raise RefusedRecord("shape", f"unknown fields {unknown} for {_class_path(cls)}")
        for name in ("callback", "errback"):
            self._check_method(d[name], name)
        kwargs = {k: v for k, v in d.items() if k != "v"}
        if plain:
            kwargs["headers"] = {k: v for k, v in d["headers"]}
        kwargs["_class"] = cls  # the class itself: request_from_dict imports nothing
        try:
            return request_from_dict(kwargs, spider=self.spider)
        except Exception as exc:  # e.g. a URL Request() refuses
            raise RefusedRecord("shape", f"Request() refused it ({exc})") from None

    def _check_method(self, name: str | None, what: str) -> None:
        if name is None:
            return
        spider = self.spider
        if (spider is None or not _NAME.match(name)
                or (name.startswith("__") and name.endswith("__"))):
            raise RefusedRecord("callback", f"{what} {name!r} is not a method of the spider")
        try:
            method = inspect.getattr_static(spider, name)
        except AttributeError:
            method = None
        bound = getattr(spider, name, None) if method is not None else None
        if not inspect.ismethod(bound) or bound.__self__ is not spider:
            raise RefusedRecord(
                "callback", f"{what} {name!r} is not a method of spider {spider.name!r}")


# --------------------------------------------------------------------------- refusals


class RefusalLog:
    """Counts the records a scheduler refused; one ERROR line per kind.

    *store*: what the records were read from (said in the line).
    """

    def __init__(self, component: str, store: str) -> None:
        self.component = component
        self.store = store
        self.count = 0
        self.by_kind: dict[str, int] = {}
        self._closing_logged = False

    def refused(
        self, exc: RefusedRecord, record: str, spider: Spider | None, *,
        crawler: Crawler | None = None, count: Callable[[str], None] | None = None,
    ) -> None:
        """Count *exc* (the record *record*); log it if it is the first of its kind.

        The first refusal makes ``scrapy crawl`` of *crawler* exit with status 1
        (:func:`~iri_scrapy.plugin.refusal.exit_status_one_on`); *count* is called with
        ``"refused_records"`` and
        ``"refused_records/<kind>"`` (the scheduler adds its stats prefix)."""
        if not self.count and crawler is not None:
            exit_status_one_on(crawler, REASON_REFUSED_RECORDS)
        if count is not None:
            count("refused_records")
            count(f"refused_records/{exc.kind}")
        self.count += 1
        first = exc.kind not in self.by_kind
        self.by_kind[exc.kind] = self.by_kind.get(exc.kind, 0) + 1
        if first:
            logger.error(
                "%(component)s: refused the stored record %(record)s of %(store)s (%(detail)s): "
                "%(what)s. It was not executed, and is kept aside; the crawl goes on without "
                "it and will close with finish_reason %(reason)s (exit status 1); more "
                "records of this kind are counted, not logged",
                {"component": self.component, "record": record, "store": self.store,
                 "detail": exc, "what": KINDS.get(exc.kind, exc.kind),
                 "reason": REASON_REFUSED_RECORDS},
                extra={"spider": spider},
            )

    def closing(self, spider: Spider | None) -> None:
        """The crawl would end ``finished``: say why it does not (once)."""
        if self._closing_logged:
            return
        self._closing_logged = True
        logger.error(
            "%(component)s: %(n)d stored records were refused (%(kinds)s; see the ERROR lines "
            "above): closing with finish_reason %(reason)s instead of finished",
            {"component": self.component, "n": self.count,
             "kinds": ", ".join(f"{k}: {n}" for k, n in sorted(self.by_kind.items())),
             "reason": REASON_REFUSED_RECORDS},
            extra={"spider": spider},
        )
