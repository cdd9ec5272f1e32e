"""FingerprintSet's segments: even memory at every size, small growth steps, exact answers."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iri_scrapy.store.fpstore import MAX_LOAD, SEGMENT_BITS, SEGMENTS, FingerprintSet


@pytest.mark.slow
def test_memory_stays_even_at_every_size() -> None:
    """Bytes per entry read after *every* add (so right after every growth step too)."""
    rng = random.Random(11)
    ours = FingerprintSet()
    shift = 64 - SEGMENT_BITS  # the top bits pick the segment
    # each segment's size, followed through the growth steps: a segment grows only when
    # a value is added to it, so a change of ``slots`` belongs to that value's segment
    sizes = [ours.slots // SEGMENTS] * SEGMENTS
    worst = worst_small = 0.0
    for n in range(1, 800_001):
        value = rng.getrandbits(64)
        slots = ours.slots
        ours.add(value)
        sizes[value >> shift] += ours.slots - slots
        if n >= 500_000:  # segments past 128 slots grow by 1/4
            worst = max(worst, ours.nbytes / n)
        elif n >= 10_000:  # smaller ones double
            worst_small = max(worst_small, ours.nbytes / n)
    assert worst <= 13.5  # 8 / 0.6, the load right after a segment grows, plus spread
    assert worst_small <= 17  # what the CLI help and the README say
    assert ours.peak_nbytes <= ours.nbytes + 8 * ours.max_segment_slots
    # one growth step moves one segment: a small share of the whole
    assert ours.max_segment_slots * SEGMENTS < 2 * ours.slots
    assert max(sizes) == ours.max_segment_slots
    used = Counter(v >> shift for v in ours)
    assert sum(used.values()) == len(ours)
    for segment, size in enumerate(sizes):
        assert used[segment] <= MAX_LOAD * size


def test_one_crowded_segment_grows_alone_and_stays_exact() -> None:
    """Values sharing their top bits all land in one segment (not what SHA-1 gives)."""
    shift = 64 - SEGMENT_BITS
    rng = random.Random(3)
    values = [(5 << shift) | rng.getrandbits(shift) for _ in range(20_000)]
    values += [(5 << shift) | (k << 32) for k in range(500)]  # same low 32 bits: one probe run
    ours, model = FingerprintSet(), set()
    for v in values:
        assert ours.add(v) == (v not in model)
        model.add(v)
    assert len(ours) == len(model)
    assert all(v in ours for v in model)
    assert set(ours) == model
    assert ours.max_segment_slots >= len(model) / MAX_LOAD
    assert (6 << shift) not in ours and -1 not in ours and 2**64 not in ours


def test_presized_and_cleared() -> None:
    ours = FingerprintSet(capacity=1_000_000)
    assert ours.slots * MAX_LOAD >= 1_000_000
    before = ours.slots
    rng = random.Random(5)
    for _ in range(900_000):
        ours.add(rng.getrandbits(64))
    assert ours.slots <= before * 1.01  # nearly no growth when sized for it
    ours.clear()
    assert len(ours) == 0 and list(ours) == [] and ours.slots == 4 * SEGMENTS


def test_runs_that_wrap_around_a_segment_survive_growth() -> None:
    """Values whose first slot is the segment's last: their run wraps to slot 0."""
    top = (1 << 52) - 1
    values = [(7 << 52) | (top - k) for k in range(300)]  # one segment, first slot = last
    values += [(7 << 52) | k for k in range(50)]  # and some at the start
    ours, model = FingerprintSet(), set()
    for v in values:
        assert ours.add(v) == (v not in model)
        model.add(v)
        assert v in ours
    assert all(v in ours for v in model) and set(ours) == model
    assert ours.add(values[0]) is False and len(ours) == len(model)


_U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
# Values crowded into the first and last segments, at the ends of their slot ranges
# (runs that wrap around), and random ones.
_CROWDED = st.one_of(
    _U64,
    st.integers(min_value=0, max_value=64),
    st.integers(min_value=(1 << 64) - 64, max_value=(1 << 64) - 1),
    st.integers(min_value=(1 << 52) - 32, max_value=(1 << 52) + 32),
)


@given(base=st.lists(_CROWDED, max_size=300), batch=st.lists(_CROWDED, max_size=600))
@settings(max_examples=40, deadline=None)  # ~25 ms each: two 4,096-segment sets
def test_bulk_update_is_one_add_per_value(base: list[int], batch: list[int]) -> None:
    """update()'s bulk rebuild (any batch, with BULK_MIN lowered) = one add() per value."""
    import iri_scrapy.store.fpstore as fpstore

    bulk, single = FingerprintSet(), FingerprintSet()
    for value in base:
        bulk.add(value)
        single.add(value)
    saved = fpstore.BULK_MIN
    fpstore.BULK_MIN = 1
    try:
        added = bulk.update(batch)
    finally:
        fpstore.BULK_MIN = saved
    assert added == sum(single.add(v) for v in batch)
    assert len(bulk) == len(single) and set(bulk) == set(single)
    assert all(v in bulk for v in base + batch)
    for value in batch + base + [7, (1 << 64) - 1]:  # adds after a rebuild still agree
        assert bulk.add(value ^ 1) == single.add(value ^ 1)
    assert set(bulk) == set(single) and bulk.slots >= len(bulk) / fpstore.MAX_LOAD
