"""The per-symbol-table lookups (sync kind, NCCL kernel) are computed once per table and
follow a table that grows."""

from __future__ import annotations

import numpy as np
import pytest
from profplug.analyzers import classify


def test_a_table_is_classified_once_and_again_when_it_grows() -> None:
    # given a symbol table
    names = ["cudaLaunchKernel", "cudaDeviceSynchronize_v3020", "ncclDevKernel_SendRecv"]
    # when it is looked up twice
    a, b = classify.kinds_for_symbols(names), classify.kinds_for_symbols(names)
    # then both are the same table, read-only, with the right kinds
    assert a is b and not a.flags.writeable
    assert a.tolist() == [classify.NONE, classify.DEVICE, classify.NONE]
    assert classify.comm_for_symbols(names).tolist() == [False, False, True]
    with pytest.raises(ValueError):
        a[0] = classify.EVENT
    # and a symbol appended later is classified
    names.append("cudaStreamSynchronize")
    assert classify.kinds_for_symbols(names).tolist()[-1] == classify.EVENT
    assert classify.comm_for_symbols(names).size == 4
    # and an equal list (another table) gets its own, equal lookup
    other = list(names)
    assert np.array_equal(classify.kinds_for_symbols(other), classify.kinds_for_symbols(names))
