"""Engine configuration: the CPU pinning reaches every thread of the process."""

from __future__ import annotations

import os
import threading

import pytest

from inference.engine.config import pin_process


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux-only API")
def test_pinning_reaches_threads_that_already_exist():
    before = os.sched_getaffinity(0)
    release = threading.Event()
    started = threading.Event()

    def worker():
        started.set()
        release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    started.wait(10)
    core = min(before)
    try:
        pin_process({core})
        masks = {int(tid): os.sched_getaffinity(int(tid)) for tid in os.listdir("/proc/self/task")}
        assert t.native_id in masks and masks[t.native_id] == {core}
        assert all(mask == {core} for mask in masks.values())
    finally:
        release.set()
        t.join()
        pin_process(before)
