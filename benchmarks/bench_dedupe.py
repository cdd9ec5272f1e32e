"""Benchmark: ``iri-scrapy dedupe`` against ``sort -u``: CPU seconds and peak memory.

Run from the repository root::

    python benchmarks/bench_dedupe.py [--lines 1200000,5000000] [--repeat 3]
                                      [--input FILE] [--keep FILE]

The data: ``../shared/corpus/urls_real.txt`` (relative to the repository, 91,424
real URLs) repeated to each ``--lines`` size by :func:`generate`; every copy after
the first is an alias-rich mutation of it: one line in four (``--alias-rate``) gets
one of the aliases a frontier dump holds (upper-case scheme or host, the scheme's default
port, a ``./`` segment, a lower-case escape, an added fragment), so about a
fifth of the lines leave the fast path and climb the ladder.  Each command runs
in its own process on the same file, contenders interleaved in rounds (best of
``--repeat``), timed by the CPU seconds (user + system) and the peak resident set
of the child (``wait4``):

1. ``sort -u FILE -o /dev/null`` (``LC_ALL=C``, one thread: ``--parallel=1``);
2. ``iri-scrapy dedupe FILE -o /dev/null -q`` (per-rung statistics on, the default),
   also from another source tree with ``--baseline DIR`` (before and after a change);
3. the same with ``--no-rung-stats``;
4. the same as 2 with ``IRISCRAPY_NATIVE=0`` (the pure-Python path).

Prints the ratios to ``sort -u`` and the nanoseconds per line (the trend over
sizes shows whether the cost is linear).  The target of issue 32: 2 within 3x
``sort -u``'s CPU at 1.2M lines, its memory below ``sort -u``'s.  Prints a skip
notice and exits 0 when the corpus is absent.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "urls_real.txt"

#: Aliases a frontier dump holds: each a function of one line (bytes).
_MUTATIONS = (
    lambda u: u.partition(b":")[0].upper() + u[u.find(b":"):] if b":" in u else u,
    lambda u: _host_edit(u, lambda h: h.upper()),
    lambda u: _host_edit(u, lambda h: h + (b":443" if u.startswith(b"https:") else b":80")),
    lambda u: u + b"#section-2",
    lambda u: _path_edit(u, b"/./"),
    lambda u: _path_edit(u, b"/a/../"),
    lambda u: u.replace(b"%2F", b"%2f").replace(b"%20", b"%7e") if b"%" in u else u + b"?q=%7e",
)


def _host_edit(url: bytes, edit: object) -> bytes:
    scheme, sep, rest = url.partition(b"://")
    if not sep:
        return url
    host, slash, path = rest.partition(b"/")
    return scheme + sep + edit(host) + slash + path  # type: ignore[operator]


def _path_edit(url: bytes, segment: bytes) -> bytes:
    scheme, sep, rest = url.partition(b"://")
    if not sep:
        return url
    host, slash, path = rest.partition(b"/")
    return scheme + sep + host + segment + path if slash else url


def generate(src: Path, lines: int, dest: Path, seed: int = 32, rate: float = 0.25) -> int:
    """Write *lines* lines to *dest*: *src* once, then copies of it where a line in
    ``1 / rate`` is an alias."""
    rng = random.Random(seed)
    base = src.read_bytes().splitlines()
    n = copy = 0
    with open(dest, "wb") as f:
        while n < lines:
            chunk = base[: lines - n]
            if copy:
                chunk = [rng.choice(_MUTATIONS)(u) if rng.random() < rate else u for u in chunk]
            f.write(b"\n".join(chunk) + b"\n")
            n += len(chunk)
            copy += 1
    return n


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """CPU seconds (user + system) and peak RSS (KiB) of *cmd* in a child process, run
    in the source tree of its ``PYTHONPATH`` (``python -m`` puts the directory it runs
    in first on ``sys.path``)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, cwd=env["PYTHONPATH"])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]}: exit status {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def contenders(path: Path, baseline: Path | None = None
               ) -> dict[str, tuple[list[str], dict[str, str]]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C")
    py = [sys.executable, "-m", "iri_scrapy", "dedupe", str(path), "-o", os.devnull, "-q"]
    before = {"dedupe, before (--baseline)": (py, dict(env, PYTHONPATH=str(baseline)))}
    return {**(before if baseline else {}),
        "sort -u": (["sort", "-u", "--parallel=1", str(path), "-o", os.devnull], env),
        "dedupe": (py, env),
        "dedupe --no-rung-stats": ([*py, "--no-rung-stats"], env),
        "dedupe (pure Python)": (py, dict(env, IRISCRAPY_NATIVE="0")),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", default="1200000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--input", type=Path, default=CORPUS)
    ap.add_argument("--keep", type=Path, help="keep the generated file here (biggest size)")
    ap.add_argument("--alias-rate", type=float, default=0.25,
                    help="the share of the lines of each copy after the first made an alias")
    ap.add_argument("--only", default="", help="comma-separated contenders to run")
    ap.add_argument("--baseline", type=Path,
                    help="also run dedupe from this source tree (its extension built)")
    args = ap.parse_args()
    if not args.input.exists():
        print(f"skipped: no corpus at {args.input}")
        return 0
    for size in (int(s) for s in args.lines.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            path = args.keep or Path(tmp) / "urls.txt"
            generate(args.input, size, path, rate=args.alias_rate)
            runs = contenders(path, args.baseline)
            if args.only:
                runs = {k: v for k, v in runs.items() if k in args.only.split(",")}
            best: dict[str, tuple[float, int]] = {}
            for _ in range(args.repeat):
                for name, (cmd, env) in runs.items():
                    cpu, rss = run(cmd, env)
                    old = best.get(name)
                    best[name] = (min(cpu, old[0]) if old else cpu, max(rss, old[1] if old else 0))
            base = best.get("sort -u")
            print(f"{size:,} lines ({path.stat().st_size / 2**20:.0f} MiB):")
            for name, (cpu, rss) in best.items():
                ratio = f"  {cpu / base[0]:.2f}x CPU, {rss / base[1]:.2f}x memory" if base else ""
                print(f"  {name:24} {cpu:7.2f} s CPU {1e9 * cpu / size:7.0f} ns/line "
                      f"{rss / 1024:7.1f} MiB{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
