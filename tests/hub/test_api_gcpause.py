"""`hub.api.gcpause`: the collector is paused inside, nested pauses count, and it is always
re-enabled by the last one out (even when the request fails)."""

from __future__ import annotations

import gc

import pytest

from hub.api.gcpause import gc_paused


def test_pauses_nest_and_the_last_one_out_re_enables() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_re_enabled_after_an_exception() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_disabled_elsewhere_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
