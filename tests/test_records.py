"""Records: the split fingerprint that tells whether two runs hold out the same examples."""

import numpy as np

from seqkit.data.records import Record, records_fingerprint


def test_fingerprint_follows_inputs_targets_and_order_not_where():
    a = [Record(text="ab", target=["AE", "B"], group="ab", where="x.dict:1"),
         Record(frames=np.zeros((2, 3), "float32"), label="k")]
    moved = [Record(text="ab", target=["AE", "B"], group="ab", where="y.dict:9"),
             Record(frames=np.zeros((2, 3), "float32"), label="k")]
    assert records_fingerprint(a) == records_fingerprint(moved)  # where a record came from is not its content
    changed = [a[0], Record(frames=np.ones((2, 3), "float32"), label="k")]
    other_target = [Record(text="ab", target=["AA", "B"], group="ab"), a[1]]
    for b in (changed, other_target, a[::-1], a[:1]):
        assert records_fingerprint(b) != records_fingerprint(a)
    # a lazily read corpus yields strings; the line boundaries count
    assert records_fingerprint(["ab", "c"]) != records_fingerprint(["a", "bc"])
    assert len(records_fingerprint([])) == 64
