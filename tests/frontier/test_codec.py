"""The frontier's request records (``iri_scrapy/frontier/codec.py``): data, never code.

Unit vectors: round trips of every kind of request, the non-plain ``meta`` path
with and without ``IRI_FRONTIER_SECRET``, and every kind of record that must be
refused without running anything (a planted pickle whose unpickling would create
a file, garbage, another version, bad shapes, classes not loaded, callbacks the
spider lacks, a tampered signature).  The records planted into a real ``JOBDIR``
store and a real Redis queue are in ``tests/frontier/test_frontier.py`` and
``tests/redis/test_redis_scheduler.py`` / ``test_redis_fleet.py``.
"""

from __future__ import annotations

import datetime
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest, JsonRequest
from scrapy.settings import Settings

from iri_scrapy.frontier import codec as codec_module
from iri_scrapy.frontier.codec import (
    MAGIC,
    REASON_REFUSED_RECORDS,
    RefusalLog,
    RefusedRecord,
    RequestCodec,
    UnserializableRequest,
    frontier_secret,
    request_class,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"a secret of this test"


class CodecSpider(Spider):
    name = "codec-test"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        return None

    def parse_item(self, response: Any, **kwargs: Any) -> Any:
        return None

    def failed(self, failure: Any) -> None:
        return None

    def __private(self, response: Any) -> None:  # name-mangled: _CodecSpider__private
        return None

    def private_request(self) -> Request:
        return Request("http://e.com/private", callback=self.__private)


class TaggedRequest(Request):
    """A custom subclass with an attribute of its own."""

    attributes = (*Request.attributes, "tag")

    def __init__(self, *args: Any, tag: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tag = tag


class PlainSubclass(Request):
    pass


class Plant:
    """Unpickling this creates the file *path* (a stand-in for any code)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


@pytest.fixture
def spider() -> CodecSpider:
    return CodecSpider()


def round_trip(request: Request, spider: Spider, secret: bytes | None = None) -> Request:
    codec = RequestCodec(spider, secret)
    data = codec.encode(request)
    assert isinstance(data, bytes)
    return codec.decode(data)


def same(a: Request, b: Request) -> None:
    assert type(a) is type(b)
    for attr in a.attributes:
        assert getattr(a, attr) == getattr(b, attr), attr


# --------------------------------------------------------------------------- round trips


def test_request_round_trip_as_json(spider: CodecSpider) -> None:
    request = Request(
        "http://e.com/a?q=1", callback=spider.parse, errback=spider.failed, method="POST",
        headers={"X-A": "b", "X-Bin": b"\xff\x00"}, body=b"\x00\x01binary\xff",
        cookies={"c": "1"}, meta={"depth": 3, "x": [1, 2.5, None, True], "d": {"k": "v"}},
        cb_kwargs={"k": "v", "n": [1, {"m": "n"}]}, dont_filter=True, priority=-2,
        flags=["f1"], encoding="latin-1",
    )
    data = RequestCodec(spider).encode(request)
    record = json.loads(data)
    assert record["v"] == 1 and record["callback"] == "parse" and record["errback"] == "failed"
    assert record["body"] == {"$b": "AAFiaW5hcnn/"}
    back = RequestCodec(spider).decode(data)
    same(request, back)
    assert back.callback == spider.parse and back.errback == spider.failed
    assert back.headers.getlist(b"X-Bin") == [b"\xff\x00"]


def test_subclasses_round_trip(spider: CodecSpider) -> None:
    form = FormRequest("http://e.com/f", formdata={"a": "é", "b": "2"}, callback=spider.parse)
    js = JsonRequest("http://e.com/j", data={"a": [1, 2]}, callback=spider.parse_item)
    tagged = TaggedRequest("http://e.com/t", tag="mine", meta={"m": 1})
    for request in (form, js, tagged, PlainSubclass("http://e.com/p")):
        back = round_trip(request, spider)
        same(request, back)
    assert json.loads(RequestCodec(spider).encode(js))["_class"] == \
        "scrapy.http.request.json_request.JsonRequest"
    assert round_trip(tagged, spider).tag == "mine"  # type: ignore[attr-defined]


def test_non_ascii_urls_and_bytes_in_meta(spider: CodecSpider) -> None:
    request = Request("http://straße.test/pфад?q=привет#frag",
                      meta={"verbatim_url": True, "raw": b"\xe2\x82\xac", "list": [b"x"],
                            "looks_tagged": {"$b": "not bytes"}, "dict_tag": {"$d": 1}})
    back = round_trip(request, spider)
    same(request, back)
    assert back.meta["looks_tagged"] == {"$b": "not bytes"} and back.meta["raw"] == b"\xe2\x82\xac"


def test_private_callback_by_its_mangled_name(spider: CodecSpider) -> None:
    request = spider.private_request()
    back = round_trip(request, spider)
    assert back.callback == request.callback


def test_drop_meta(spider: CodecSpider) -> None:
    request = Request("http://e.com/", meta={"iri_frontier_id": 3, "keep": 1})
    data = RequestCodec(spider).encode(request, drop_meta=("iri_frontier_id",))
    assert RequestCodec(spider).decode(data).meta == {"keep": 1}


# --------------------------------------------------------------------------- non-plain meta


NOT_PLAIN = [
    {"meta": {"when": datetime.date(2024, 1, 2)}},
    {"meta": {"t": (1, 2)}},
    {"meta": {1: "int key"}},
    {"cb_kwargs": {"s": {1, 2}}},
]


@pytest.mark.parametrize("kwargs", NOT_PLAIN)
def test_non_plain_values_refused_without_a_secret(spider: CodecSpider, kwargs: Any) -> None:
    with pytest.raises(UnserializableRequest, match="IRI_FRONTIER_SECRET"):
        RequestCodec(spider).encode(Request("http://e.com/", **kwargs))


@pytest.mark.parametrize("kwargs", NOT_PLAIN)
def test_non_plain_values_signed_with_a_secret(spider: CodecSpider, kwargs: Any) -> None:
    request = Request("http://e.com/", callback=spider.parse, **kwargs)
    data = RequestCodec(spider, SECRET).encode(request)
    assert data.startswith(MAGIC)
    back = RequestCodec(spider, SECRET).decode(data)
    same(request, back)
    # without the secret, or with another one, it is refused (never unpickled)
    for other in (None, b"another secret"):
        with pytest.raises(RefusedRecord) as info:
            RequestCodec(spider, other).decode(data)
        assert info.value.kind == "signature"


def test_plain_requests_stay_json_with_a_secret(spider: CodecSpider) -> None:
    data = RequestCodec(spider, SECRET).encode(Request("http://e.com/", meta={"a": 1}))
    assert data.startswith(b"{")


def test_unserializable_callbacks_and_classes(spider: CodecSpider) -> None:
    with pytest.raises(UnserializableRequest):
        RequestCodec(spider, SECRET).encode(Request("http://e.com/", callback=lambda r: None))

    def local() -> type[Request]:
        class Twice(Request):
            pass
        return Twice

    first, second = local(), local()
    assert first is not second
    with pytest.raises(UnserializableRequest, match="cannot be told apart"):
        RequestCodec(spider).encode(first("http://e.com/"))


def test_secret_from_setting_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IRI_FRONTIER_SECRET", raising=False)
    assert frontier_secret(Settings()) is None
    assert frontier_secret(Settings({"IRI_FRONTIER_SECRET": "s"})) == b"s"
    monkeypatch.setenv("IRI_FRONTIER_SECRET", "env")
    assert frontier_secret(Settings()) == b"env"
    assert frontier_secret(None) == b"env"
    assert frontier_secret(Settings({"IRI_FRONTIER_SECRET": "s"})) == b"s"


# --------------------------------------------------------------------------- refused records


def refused(data: Any, spider: Spider, secret: bytes | None = None) -> str:
    with pytest.raises(RefusedRecord) as info:
        RequestCodec(spider, secret).decode(data)
    return info.value.kind


def good_record(spider: Spider, **changes: Any) -> bytes:
    record = json.loads(RequestCodec(spider).encode(Request("http://e.com/", callback=spider.parse)))
    record.update(changes)
    return json.dumps(record).encode()


def test_planted_pickle_is_never_unpickled(spider: CodecSpider, tmp_path: Path) -> None:
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Plant(str(control)))).close()  # noqa: S301 - the control
    assert control.exists()  # the payload does run when unpickled
    target = tmp_path / "pwned"
    for protocol in (0, 2, 4, 5):
        payload = pickle.dumps(Plant(str(target)), protocol=protocol)
        assert refused(payload, spider, SECRET) in ("pickle", "garbage")
    # Scrapy's own to_dict pickled, as iri_scrapy wrote records before
    legacy = pickle.dumps(Request("http://e.com/").to_dict(), protocol=4)
    assert refused(legacy, spider) == "pickle"
    # a signed-looking record with a forged signature
    forged = MAGIC + b"\x00" * 32 + pickle.dumps(Plant(str(target)))
    assert refused(forged, spider, SECRET) == "signature"
    assert refused(forged, spider, None) == "signature"
    # a tampered body under a real signature
    data = RequestCodec(spider, SECRET).encode(Request("http://e.com/", meta={"t": (1,)}))
    tampered = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
    assert refused(tampered, spider, SECRET) == "signature"
    truncated = data[: len(MAGIC) + 10]
    assert refused(truncated, spider, SECRET) == "signature"
    assert not target.exists()


@pytest.mark.parametrize("data", [
    b"", b"garbage", b"\x00\x01\x02", "text, not bytes", 12, None, b"{not json", b"\xff{",
    b"[1, 2]", b'{"a":' * 100_000, b'{"v": 1}',
])
def test_garbage(spider: CodecSpider, data: Any) -> None:
    assert refused(data, spider) in ("garbage", "shape")


@pytest.mark.parametrize("version", [0, 2, "1", True, None, 1.0])
def test_wrong_version(spider: CodecSpider, version: Any) -> None:
    assert refused(good_record(spider, v=version), spider) == "version"
    record = json.loads(good_record(spider))
    del record["v"]
    assert refused(json.dumps(record).encode(), spider) == "version"


@pytest.mark.parametrize("changes", [
    {"url": 1}, {"callback": 3}, {"errback": ["x"]}, {"method": None}, {"body": "str body"},
    {"body": {"$b": "!!not base64"}}, {"body": {"$b": 1}}, {"dont_filter": 1},
    {"priority": True}, {"priority": 1.5}, {"flags": "f"}, {"flags": [1]}, {"meta": []},
    {"cb_kwargs": "x"}, {"cookies": 3}, {"headers": {"X": "y"}}, {"headers": [["X", ["y"]]]},
    {"headers": [[{"$b": "WA=="}]]}, {"encoding": 0}, {"unknown": 1}, {"_class": 5},
    {"dumps_kwargs": {}}, {"url": "not a url"},
])
def test_bad_shapes(spider: CodecSpider, changes: dict[str, Any]) -> None:
    assert refused(good_record(spider, **changes), spider) == "shape"


def test_missing_field(spider: CodecSpider) -> None:
    record = json.loads(good_record(spider))
    del record["meta"]
    assert refused(json.dumps(record).encode(), spider) == "shape"


@pytest.mark.parametrize("path", [
    "antigravity.Request", "antigravity.X", "os.system", "builtins.dict",
    "scrapy.Spider", "scrapy.http.request.Request.replace", "tests.frontier.test_codec.Plant",
    "this_module_does_not_exist_3987.Request", "", "Request",
])
def test_class_not_loaded_or_not_a_request(spider: CodecSpider, path: str) -> None:
    before = set(sys.modules)
    assert refused(good_record(spider, _class=path), spider) == "class"
    assert "antigravity" not in sys.modules
    assert set(sys.modules) - before == set()  # nothing imported


def test_request_class_lookup() -> None:
    assert request_class("scrapy.http.request.Request") is Request
    assert request_class("scrapy.http.request.form.FormRequest") is FormRequest
    assert request_class("tests.frontier.test_codec.TaggedRequest") is TaggedRequest
    assert request_class("scrapy.http.FormRequest") is None  # by where it is defined
    assert request_class("tests.frontier.test_codec.Plant") is None


@pytest.mark.parametrize("name", [
    "missing", "__init__", "__class__", "name", "from_crawler", "parse.__func__", "",
    "crawler", "logger", "_CodecSpider__missing",
])
def test_callback_not_on_the_spider(spider: CodecSpider, name: str) -> None:
    assert refused(good_record(spider, callback=name), spider) == "callback"
    assert refused(good_record(spider, callback=None, errback=name), spider) == "callback"


def test_callback_without_a_spider() -> None:
    spider = CodecSpider()
    data = good_record(spider)
    assert refused(data, None) == "callback"  # type: ignore[arg-type]
    assert RequestCodec(None).decode(good_record(spider, callback=None)).url == "http://e.com/"


def test_refusal_log_once_per_kind(spider: CodecSpider, caplog: pytest.LogCaptureFixture) -> None:
    log = RefusalLog("Test", "the test store")
    with caplog.at_level("ERROR", logger=codec_module.__name__):
        for kind in ("pickle", "pickle", "callback", "pickle"):
            log.refused(RefusedRecord(kind, "x"), "row", spider)
        log.closing(spider)
        log.closing(spider)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert all(REASON_REFUSED_RECORDS in line for line in lines)
    assert "never unpickled" in lines[0] and "not a method of this spider" in lines[1]
    assert log.count == 4 and log.by_kind == {"pickle": 3, "callback": 1}


def test_the_docs_name_the_reason_and_setting() -> None:
    settings = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    stats = (ROOT / "docs" / "stats.md").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "frontier.md").read_text(encoding="utf-8")
    for text in (settings, docs):
        assert f"`{REASON_REFUSED_RECORDS}`" in text
        assert "`IRI_FRONTIER_SECRET`" in text
    assert "`iri/frontier/refused_records`" in stats
    assert "refused_records" in stats.split("`iri/redis_scheduler/*`", 1)[1].split("\n", 1)[0]
