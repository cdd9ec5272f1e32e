"""Start-up refusals end the crawl with one clear ERROR line, a finish_reason, exit code 1.

(Scrapy 2.18+; on 2.17 the error is raised, with a traceback, and the exit
status is 1.)  Each case runs a real ``scrapy crawl`` of a tiny project in ``tmp_path`` (its one
start URL is a ``data:`` URL: nothing leaves the machine): a ``JOBDIR`` written
with other ``IRI_*`` options, an unreachable Redis, and ``RedisIRIDupeFilter``
without the ``redis`` package (a ``redis`` package on ``PYTHONPATH`` whose import
fails).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN
from tests.support.redis_support import find_free_port


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "settings.py").write_text(textwrap.dedent("""\
        BOT_NAME = "proj"
        SPIDER_MODULES = ["proj.spiders"]
        ADDONS = {"iri_scrapy.Addon": 0}
        TELNETCONSOLE_ENABLED = False
        """))
    (root / "proj" / "spiders" / "one.py").write_text(textwrap.dedent("""\
        import scrapy

        class One(scrapy.Spider):
            name = "one"
            start_urls = ["data:,hello"]

            def parse(self, response):
                yield {"body": response.text}
        """))
    return root


def scrapy_crawl(root: Path, *settings: str, pythonpath: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(pythonpath), env.get("PYTHONPATH")) if p
        )
    args = [a for s in settings for a in ("-s", s)]
    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "scrapy", "crawl", "one", *args], cwd=root, env=env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )


def check_refusal(proc: subprocess.CompletedProcess[str], reason: str, *hints: str) -> str:
    log = proc.stderr
    assert proc.returncode != 0, log[-3000:]
    if not CLOSESPIDER_AT_OPEN:  # Scrapy 2.17: the error is raised, with its traceback
        for hint in hints:
            assert hint in log
        assert "downloader/request_count" not in log
        return ""
    errors = [line for line in log.splitlines() if re.search(r"\] ERROR: ", line)]
    assert len(errors) == 1, log[-3000:]
    for hint in hints:
        assert hint in errors[0]
    assert "Traceback" not in log and "Engine slot not assigned" not in log, log[-3000:]
    assert f"'finish_reason': '{reason}'" in log
    assert f"Closing spider ({reason})" in log
    assert "downloader/request_count" not in log  # nothing was fetched
    return errors[0]


@pytest.mark.slow
def test_jobdir_written_with_other_options(tmp_path: Path) -> None:
    root = project(tmp_path)
    jobdir = f"JOBDIR={tmp_path / 'job'}"
    first = scrapy_crawl(root, jobdir)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "'finish_reason': 'finished'" in first.stderr
    # with the add-on and JOBDIR the seen-set lives in the crash-tolerant frontier store
    store = tmp_path / "job" / "iri_frontier.sqlite3"
    before = store.read_bytes()
    second = scrapy_crawl(root, jobdir, "IRI_LEVEL=simple")
    line = check_refusal(second, "iri_jobdir_mismatch", "refusing to mix keys",
                         "IRI_JOBDIR_ALLOW_RESET = True",
                         "level=scheme (this crawl: simple)")
    assert not line or len(line) < 400 + len(str(tmp_path)), line  # what differs only
    assert store.read_bytes() == before  # untouched
    third = scrapy_crawl(root, jobdir, "IRI_LEVEL=simple", "IRI_JOBDIR_ALLOW_RESET=True")
    assert third.returncode == 0 and "'finish_reason': 'finished'" in third.stderr


@pytest.mark.slow
def test_jobdir_fingerprint_file_written_with_other_options(tmp_path: Path) -> None:
    """The same refusal for the plain JOBDIR fingerprint file (IRI_FRONTIER = False)."""
    root = project(tmp_path)
    jobdir = f"JOBDIR={tmp_path / 'job'}"
    first = scrapy_crawl(root, jobdir, "IRI_FRONTIER=False")
    assert first.returncode == 0, first.stderr[-3000:]
    before = (tmp_path / "job" / "iri_fingerprints.bin").read_bytes()
    second = scrapy_crawl(root, jobdir, "IRI_FRONTIER=False", "IRI_LEVEL=simple")
    check_refusal(second, "iri_jobdir_mismatch", "refusing to mix keys",
                  "IRI_JOBDIR_ALLOW_RESET = True", "level=scheme (this crawl: simple)")
    assert (tmp_path / "job" / "iri_fingerprints.bin").read_bytes() == before  # untouched


@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.parametrize("value", ["IRI_LEVEL=semantic", "IRI_PROTOCOL_MIN_EVIDENCE=0"])
def test_unusable_setting(tmp_path: Path, value: str) -> None:
    proc = scrapy_crawl(project(tmp_path), value)
    check_refusal(proc, "iri_bad_setting", value.split("=")[0], "fix the setting")


def test_unreachable_redis(tmp_path: Path) -> None:
    port = find_free_port()
    proc = scrapy_crawl(project(tmp_path), "DUPEFILTER_CLASS=iri_scrapy.RedisIRIDupeFilter",
                        f"IRI_REDIS_URL=redis://:s3cret@127.0.0.1:{port}/0")
    check_refusal(proc, "iri_redis_unavailable",
                  f"cannot use Redis at redis://:***@127.0.0.1:{port}/0", "IRI_REDIS_URL")
    assert "s3cret" not in proc.stderr


@pytest.mark.slow
def test_redis_dupefilter_without_the_redis_package(tmp_path: Path) -> None:
    fake = tmp_path / "no-redis"
    (fake / "redis").mkdir(parents=True)
    (fake / "redis" / "__init__.py").write_text(
        'raise ImportError("No module named \'redis\' (hidden by the test)")\n'
    )
    proc = scrapy_crawl(project(tmp_path), "DUPEFILTER_CLASS=iri_scrapy.RedisIRIDupeFilter",
                        pythonpath=fake)
    check_refusal(proc, "iri_redis_not_installed", 'pip install "iri-scrapy[redis]"')
