"""Property tests of the varlen bookkeeping: cu_seqlens <-> lengths, paged slots and gathers."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cudashim.replacements._varlen import (
    blocks_needed,
    cu_from_lengths,
    gather_paged_packed,
    gather_paged_padded,
    lengths_from_cu,
    paged_slots,
)

lengths_st = st.lists(st.integers(min_value=0, max_value=70), min_size=1, max_size=8)


@given(lengths_st)
def test_cu_and_lengths_round_trip(lengths):
    cu = cu_from_lengths(lengths)
    assert cu.dtype == torch.int32 and cu.shape == (len(lengths) + 1,)
    assert int(cu[0]) == 0 and int(cu[-1]) == sum(lengths)
    assert torch.all(cu[1:] >= cu[:-1])
    assert lengths_from_cu(cu).tolist() == lengths
    assert cu_from_lengths(lengths_from_cu(cu)).tolist() == cu.tolist()


@st.composite
def paged_case(draw):
    block_size = draw(st.sampled_from([1, 4, 16]))
    lengths = draw(lengths_st)
    need = [blocks_needed(n, block_size) for n in lengths]
    spare = draw(st.integers(0, 4))
    total = sum(need) + spare
    perm = draw(st.permutations(list(range(total)))) if total else []
    width = max(max(need), 1)
    table = torch.full((len(lengths), width), -1, dtype=torch.int32)  # -1 padding, as nano-vllm
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = torch.tensor(perm[used:used + n], dtype=torch.int32)
        used += n
    return block_size, lengths, table, max(total, 1)


def _token_ids(total_blocks: int, block_size: int) -> torch.Tensor:
    """A cache whose every slot holds its own flat slot number (so a gather shows where it read)."""
    return torch.arange(total_blocks * block_size * 2, dtype=torch.float64).view(total_blocks, block_size, 2, 1)


@settings(max_examples=60, deadline=None)
@given(paged_case())
def test_paged_slots_follow_the_block_table(case):
    block_size, lengths, table, _ = case
    for b, n in enumerate(lengths):
        pos = torch.arange(n)
        slots = paged_slots(table, pos, torch.full_like(pos, b), block_size)
        expected = [int(table[b, t // block_size]) * block_size + t % block_size for t in range(n)]
        assert slots.tolist() == expected


@settings(max_examples=60, deadline=None)
@given(paged_case())
def test_packed_gather_returns_each_sequence_in_order(case):
    block_size, lengths, table, total_blocks = case
    cache = _token_ids(total_blocks, block_size)
    got = gather_paged_packed(cache, table, lengths)
    assert got.shape == (sum(lengths), 2, 1)
    row = 0
    for b, n in enumerate(lengths):
        for t in range(n):
            page, off = int(table[b, t // block_size]), t % block_size
            assert torch.equal(got[row], cache[page, off])
            row += 1


@settings(max_examples=60, deadline=None)
@given(paged_case())
def test_padded_gather_holds_each_sequence_prefix(case):
    block_size, lengths, table, total_blocks = case
    cache = _token_ids(total_blocks, block_size)
    nb = max(blocks_needed(max(lengths), block_size), 1)
    got = gather_paged_padded(cache, table, nb)
    assert got.shape == (len(lengths), nb * block_size, 2, 1)
    for b, n in enumerate(lengths):
        for t in range(n):
            assert torch.equal(got[b, t], cache[int(table[b, t // block_size]), t % block_size])
