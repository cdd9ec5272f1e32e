"""``scrapy fetch "HTTP://..."``: the package's fetch command takes an upper-case scheme.

Scrapy's own command checks its argument with ``w3lib.url.is_url``, which reads only
a lower-case ``http://`` and prints the usage for ``HTTP://www.example.test/``
(schemes are case-insensitive, RFC 3986 section 3.1).  Real ``scrapy fetch``
processes, with and without the add-on, through the local demo-web server (a
proxy for its hosts on 127.0.0.1): the page is printed and the server saw it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from iri_scrapy.commands import lower_scheme
from tests.support.server import serve_site
from tests.support.site import DEMO_SITE
from tests.support.watch import run_watched

ADDON = ["-s", 'ADDONS={"iri_scrapy.Addon": 0}']


def test_lower_scheme() -> None:
    assert lower_scheme("HTTP://Example.COM/A") == "http://Example.COM/A"
    assert lower_scheme("Https://x.test/") == "https://x.test/"
    assert lower_scheme("FILE:///tmp/x") == "file:///tmp/x"
    for other in ("mailto:A@B", "FTP://x/", "no scheme", "http:/x"):
        assert lower_scheme(other) == other


@pytest.mark.slow
@pytest.mark.parametrize("settings", [[], ADDON], ids=["stock-settings", "addon"])
def test_scrapy_fetch_upper_case_scheme(settings: list[str]) -> None:
    with serve_site(DEMO_SITE) as srv:
        env = {k: v for k, v in os.environ.items()
               if k.lower() not in {"no_proxy", "http_proxy", "https_proxy", "all_proxy"}
               and k != "SCRAPY_SETTINGS_MODULE"}
        env.update(http_proxy=srv.proxy_url, PYTHONIOENCODING="utf-8")
        proc = run_watched(
            [sys.executable, "-m", "scrapy", "fetch", "--nolog", *settings,
             "HTTP://WWW.EXAMPLE.TEST/"],
            what="scrapy fetch", encoding="utf-8", env=env, cwd=tempfile.gettempdir(),
            stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "Usage" not in proc.stdout + proc.stderr
        assert "<title>" in proc.stdout
        assert [(h.key.host, h.key.path) for h in srv.hits.hits if h.key] == [
            ("www.example.test", "/")]
