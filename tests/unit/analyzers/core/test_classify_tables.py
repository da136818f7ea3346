"""The per-symbol-table lookups (sync kind, NCCL kernel): within ``tables_kept`` computed once
per table, and again for a table that grew; outside, computed each time (nothing kept)."""

from __future__ import annotations

import numpy as np
import pytest
from profplug.analyzers.core import classify


def test_a_table_is_classified_once_within_the_scope_and_again_when_it_grows() -> None:
    # given a symbol table
    names = ["cudaLaunchKernel", "cudaDeviceSynchronize_v3020", "ncclDevKernel_SendRecv"]
    want = [classify.NONE, classify.DEVICE, classify.NONE]
    # outside the scope: the right kinds, a new (writable) array each time
    a = classify.kinds_for_symbols(names)
    assert a.tolist() == want and a.flags.writeable
    assert classify.kinds_for_symbols(names) is not a
    with classify.tables_kept():
        # when looked up twice within it: one read-only table with the right kinds
        k = classify.kinds_for_symbols(names)
        assert classify.kinds_for_symbols(names) is k and k.tolist() == want
        assert classify.comm_for_symbols(names).tolist() == [False, False, True]
        with pytest.raises(ValueError):
            k[0] = classify.EVENT
        # and a symbol appended later is classified
        names.append("cudaStreamSynchronize")
        assert classify.kinds_for_symbols(names).tolist()[-1] == classify.EVENT
        assert classify.comm_for_symbols(names).size == 4
        # and an equal list (another table) gets its own, equal lookup
        other = list(names)
        assert np.array_equal(classify.kinds_for_symbols(other),
                              classify.kinds_for_symbols(names))
    # on exit nothing is kept
    assert classify.kinds_for_symbols(names) is not classify.kinds_for_symbols(names)
