"""LazyStream: a stream built part by part when read reads like the list of its parts."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.isa import make
from hwmodel.streams import LazyStream


def _parts(sizes: list[int]):
    built = []  # part index per build, to check parts are built lazily

    def producer(k: int, n: int):
        def build():
            built.append(k)
            return [make("MAC", mask=1, col=i % 64, count=1, gb=0, acc=k % 8).at(1000 * k + i) for i in range(n)]
        return build

    whole = [make("MAC", mask=1, col=i % 64, count=1, gb=0, acc=k % 8).at(1000 * k + i)
             for k, n in enumerate(sizes) for i in range(n)]
    return [(n, producer(k, n)) for k, n in enumerate(sizes)], whole, built


@given(st.lists(st.integers(0, 40), max_size=12), st.integers(1, 50))
def test_slices_and_items_equal_the_list(sizes, step):
    parts, whole, _ = _parts(sizes)
    s = LazyStream(parts)
    assert len(s) == len(whole)
    assert list(s) == whole
    got = []
    for i in range(0, len(s), step):
        got.extend(s[i:i + step])
    assert got == whole
    for i in (0, len(whole) // 2, len(whole) - 1):
        if whole:
            assert s[i] == whole[i] and s[i - len(whole)] == whole[i]


def test_parts_are_built_when_read_and_few_are_kept():
    parts, whole, built = _parts([10, 10, 10, 10])
    s = LazyStream(parts, cached=2)
    assert built == []  # nothing built up front
    assert s[0:5] == whole[0:5] and built == [0]
    assert s[5:25] == whole[5:25] and built == [0, 1, 2]
    assert s[0] == whole[0] and built == [0, 1, 2, 0]  # part 0 was let go: built again


def test_a_part_that_breaks_its_announced_length_is_an_error():
    s = LazyStream([(3, lambda: [make("PRE", mask=1)])])
    with pytest.raises(RuntimeError, match="1 instructions built, 3 announced"):
        s[0]


def test_index_out_of_range():
    parts, _, _ = _parts([2])
    with pytest.raises(IndexError):
        LazyStream(parts)[2]


@given(st.lists(st.integers(1, 30), min_size=1, max_size=10), st.integers(1, 40))
def test_rows_run_to_the_end_of_a_part_and_equal_the_parts(sizes, step):
    """`rows(start, stop)` returns whole parts (from `start` on): read front to back, the
    slices concatenate to every part's table, each part encoded once."""
    import numpy as np

    encoded = []
    parts = [(n, lambda: [], lambda k=k, n=n: (encoded.append(k), np.full((n, 2), k))[1]) for k, n in enumerate(sizes)]
    s = LazyStream(parts)
    assert s.has_rows
    got, start = [], 0
    while start < len(s):
        t = s.rows(start, start + step)
        assert start + len(t) in s._offsets and len(t) >= min(step, len(s) - start)
        got.append(t)
        start += len(t)
    assert np.array_equal(np.concatenate(got), np.concatenate([np.full((n, 2), k) for k, n in enumerate(sizes)]))
    assert encoded == list(range(len(sizes)))
    assert not LazyStream([(n, lambda: []) for n in sizes]).has_rows
