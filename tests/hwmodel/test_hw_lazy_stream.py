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

    whole = [
        make("MAC", mask=1, col=i % 64, count=1, gb=0, acc=k % 8).at(1000 * k + i)
        for k, n in enumerate(sizes)
        for i in range(n)
    ]
    return [(n, producer(k, n)) for k, n in enumerate(sizes)], whole, built


@given(st.lists(st.integers(0, 40), max_size=12), st.integers(1, 50))
def test_slices_and_items_equal_the_list(sizes, step):
    parts, whole, _ = _parts(sizes)
    s = LazyStream(parts)
    assert len(s) == len(whole)
    assert list(s) == whole
    got = []
    for i in range(0, len(s), step):
        got.extend(s[i : i + step])
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
def test_rows_are_read_piece_by_piece_and_equal_the_parts(sizes, step):
    """`rows(start, stop)` asks each part for the piece the range covers: read front to back in
    slices of `step`, the slices concatenate to every part's table, and each part is asked for
    consecutive pieces, in order."""
    import numpy as np

    asked = []

    def part(k, n):
        def rows(lo, hi, out):
            asked.append((k, lo, hi))
            out[:] = np.stack([np.full(hi - lo, k), np.arange(lo, hi)], axis=1)

        return (n, lambda: [], rows)

    s = LazyStream([part(k, n) for k, n in enumerate(sizes)], width=2)
    assert s.has_rows
    buf = np.full((step, 2), -7)  # one buffer for every slice, as a streamed run reads
    got = [s.rows(i, i + step, buf).copy() for i in range(0, len(s), step)]
    assert all(len(t) == min(step, len(s) - i) for t, i in zip(got, range(0, len(s), step)))
    whole = np.concatenate([np.stack([np.full(n, k), np.arange(n)], axis=1) for k, n in enumerate(sizes)])
    assert np.array_equal(np.concatenate(got), whole)
    for k, n in enumerate(sizes):  # each part: consecutive pieces covering it once
        pieces = [(lo, hi) for kk, lo, hi in asked if kk == k]
        assert pieces[0][0] == 0 and pieces[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    assert np.array_equal(s.rows(0, len(s)), np.concatenate(got))  # without a buffer: a new array
    assert not LazyStream([(n, lambda: []) for n in sizes]).has_rows
