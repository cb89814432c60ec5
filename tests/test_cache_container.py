"""A cache in a container's /dev/shm: a 64 MB tmpfs, where the default size (64 MiB of
entries + 4 MiB of cached misses) does not fit. The default takes what fits and says so
once, with the remedy; an explicit size that does not fit fails as before, and leaves no
file behind; workers that start together all attach to one file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import pytest
from tmpfs_mounts import tmpfs
from ziggurat import Cache
from ziggurat._native import SegmentError, open_pair

MiB = 1 << 20


def _free(d: str) -> int:
    st = os.statvfs(d)
    return st.f_bavail * st.f_frsize


def test_default_size_fits_a_64mb_dev_shm_and_says_how_to_give_more() -> None:
    with tmpfs("64m") as d:
        free = _free(d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            c = Cache("app", directory=d)
        assert not c.degraded, c.degraded_reason
        c.set("k", {"v": 1})
        assert c.get("k") == {"v": 1}
        stats = c.stats()["host"]
        taken = stats["l2"]["file_size"] + stats["negative_l2"]["file_size"]
        # What fits, with headroom: a quarter of the free space stays for others.
        assert 16 * MiB <= taken <= free * 3 // 4
        notices = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(notices) == 1, notices
        for remedy in ("--shm-size", "shm_size", "emptyDir", "medium: Memory", "sizeLimit"):
            assert remedy in notices[0]
        # A second worker attaches to the same files, without a warning of other parameters.
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            c2 = Cache("app", directory=d)
        assert [str(w.message) for w in again] == []
        assert c2._segment is not None and c._segment is not None
        assert c2._segment.file_id == c._segment.file_id
        assert c2.get("k") == {"v": 1}
        # Once per directory: another cache fitted there is not announced again.
        with warnings.catch_warnings(record=True) as third:
            warnings.simplefilter("always")
            c3 = Cache("other", directory=d)
        assert not c3.degraded and [str(w.message) for w in third] == []
        for x in (c, c2, c3):
            x.close()


def test_an_explicit_size_that_does_not_fit_fails_and_leaves_nothing_behind() -> None:
    with tmpfs("64m") as d:
        # The entries' file (62 MiB) fits; its cached-miss companion (3.9 MiB) does not.
        with pytest.warns(RuntimeWarning, match="no room"):
            c = Cache("big", size="62MiB", directory=d)
        assert c.degraded and c.degraded_cause == "no_space"
        assert os.listdir(d) == []
        # So the next cache in the directory still gets its room.
        c2 = Cache("small", size="8MiB", directory=d)
        assert not c2.degraded
        c.close()
        c2.close()


def test_the_pair_is_removed_whole_when_its_second_file_fails() -> None:
    with tmpfs("64m") as d:
        with pytest.raises(SegmentError) as e:
            open_pair("p", "40MiB", "40MiB", directory=d)
        assert getattr(e.value, "cause", None) == "no_space"
        assert os.listdir(d) == []
        # An entries' file made earlier by someone else is never removed by a failure.
        main, neg, _ = open_pair("q", "8MiB", None, directory=d)
        neg.unlink()
        neg.close()
        with pytest.raises(SegmentError, match="no room"):
            open_pair("q", "8MiB", "60MiB", directory=d)
        assert os.listdir(d) == ["ziggurat.q.v2"]
        main.close()


_WORKER = """
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.001)
from ziggurat import Cache
c = Cache("racing", directory=sys.argv[1])
seg = c._segment
print(json.dumps({"degraded": c.degraded_reason,
                  "id": list(seg.file_id) if seg else None,
                  "neg": list(c._host.neg.file_id) if c._host.neg else None}))
"""


def test_workers_starting_together_attach_to_one_file() -> None:
    with tmpfs("64m") as d:
        go = os.path.join(d, "go")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, d, go], stdout=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        time.sleep(0.5)  # every worker is waiting
        with open(go, "w"):
            pass
        docs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
        assert [doc["degraded"] for doc in docs] == [None] * 4, docs
        assert len({tuple(doc["id"]) for doc in docs}) == 1
        assert len({tuple(doc["neg"]) for doc in docs}) == 1
        os.unlink(go)
        assert sorted(os.listdir(d)) == ["ziggurat.racing.neg.v2", "ziggurat.racing.v2"]


def test_the_default_is_kept_whole_where_it_fits() -> None:
    with tmpfs("256m") as d:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            c = Cache("roomy", directory=d)
        assert [str(w.message) for w in caught] == []
        host = c.stats()["host"]
        assert host["l2"]["file_size"] > 63 * MiB and host["negative_l2"]["file_size"] == 4 * MiB
        c.close()
