#!/usr/bin/env python3
"""Check the ladder's invariants (tests/support/props.py) on a million generated strings.

Strings are drawn (seeded, reproducible) from the adversarial alphabet of
tests/core/test_properties.py: "%", hex digits, escapes of unreserved and non-ASCII
characters, delimiters, combining marks, a KELVIN SIGN..., after a prefix such
as ``http://h/``, ``foo:``, ``mailto:`` or nothing.  For each string, one
(keep_fragment, nfc) combination, drawn too, is checked for idempotence of every
level and form, the IRI form mapping back to the URI form, the code paths
agreeing and no level splitting what a lower one merged; ``explain`` against
``equivalent`` on every ``--explain-every``-th string (it is the slowest);
``iri_to_uri(uri_to_iri(u)) == u`` on every canonical URI.  Not run by pytest.

    python benchmarks/prop_check.py [--count 1000000] [--seed 3987] [--max-seconds S]

Prints counts as it goes, then each kind of violation with its first
counterexample; exit status 1 if there was any.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.core.test_properties import ADVERSARIAL_PREFIXES, ADVERSARIAL_TOKENS  # noqa: E402
from tests.support import props  # noqa: E402

TOKENS = tuple(dict.fromkeys(props.TOKENS + ADVERSARIAL_TOKENS))


def generate(rng: random.Random) -> str:
    prefix = rng.choice(ADVERSARIAL_PREFIXES)
    return prefix + "".join(rng.choices(TOKENS, k=rng.randint(0, 8)))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=3987)
    ap.add_argument("--explain-every", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop early after this long (the count checked is printed)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    kinds: Counter[str] = Counter()
    first: dict[str, str] = {}
    distinct: set[str] = set()
    start = time.perf_counter()
    checked = 0
    for i in range(args.count):
        text = generate(rng)
        combo = (rng.choice(props.COMBOS),)
        failures = [*props.check_normalize(text, combo), *props.check_levels(text, combo)]
        if i % args.explain_every == 0:
            failures += props.check_explain(text, combo)
        failures += props.check_round_trip(text)
        for failure in failures:
            kind = failure.split(":", 1)[0][:50]
            kinds[kind] += 1
            first.setdefault(kind, failure)
        distinct.add(text)
        checked += 1
        if checked % 100_000 == 0:
            elapsed = time.perf_counter() - start
            print(f"{checked:>9,} strings  {len(distinct):>9,} distinct  "
                  f"{sum(kinds.values()):>6} violations  {elapsed:7.0f} s", flush=True)
        if args.max_seconds is not None and time.perf_counter() - start > args.max_seconds:
            break
    elapsed = time.perf_counter() - start
    print(f"checked {checked:,} strings ({len(distinct):,} distinct, seed {args.seed}) "
          f"in {elapsed:.0f} s: {sum(kinds.values())} violations")
    for kind, n in kinds.most_common():
        print(f"{n:>8}  {first[kind]}")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
