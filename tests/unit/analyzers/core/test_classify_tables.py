"""The per-symbol-table lookups (sync kind, NCCL kernel): with a caller's ``Memo`` computed
once per table, and again for a table that grew; without one, computed each time (nothing
kept)."""

from __future__ import annotations

import numpy as np
import pytest
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo


def test_a_table_is_classified_once_per_memo_and_again_when_it_grows() -> None:
    # given a symbol table
    names = ["cudaLaunchKernel", "cudaDeviceSynchronize_v3020", "ncclDevKernel_SendRecv"]
    want = [classify.NONE, classify.DEVICE, classify.NONE]
    # without a memo: the right kinds, a new (writable) array each time
    a = classify.kinds_for_symbols(names)
    assert a.tolist() == want and a.flags.writeable
    assert classify.kinds_for_symbols(names) is not a
    memo = Memo()
    # when looked up twice with one memo: one read-only table with the right kinds
    k = classify.kinds_for_symbols(names, memo)
    assert classify.kinds_for_symbols(names, memo) is k and k.tolist() == want
    assert classify.comm_for_symbols(names, memo).tolist() == [False, False, True]
    with pytest.raises(ValueError):
        k[0] = classify.EVENT
    # and a symbol appended later is classified
    names.append("cudaStreamSynchronize")
    assert classify.kinds_for_symbols(names, memo).tolist()[-1] == classify.EVENT
    assert classify.comm_for_symbols(names, memo).size == 4
    # and an equal list (another table) gets its own, equal lookup
    other = list(names)
    assert np.array_equal(classify.kinds_for_symbols(other, memo),
                          classify.kinds_for_symbols(names, memo))
    # another memo keeps nothing of the first one's
    assert classify.kinds_for_symbols(names, Memo()) is not \
        classify.kinds_for_symbols(names, memo)
