"""The requests-per-minute window (app/request_cost.py): a request refused after it was counted
gives its entry back, and a cost of N is told to wait until N fit, on a clock of the test's."""

from __future__ import annotations

import pytest
from limits.storage import MemoryStorage

from app.request_cost import RequestWindow, file_cost, texts_cost


class Clock:
    now = 1000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    import limits.storage.memory

    c = Clock()
    monkeypatch.setattr(limits.storage.memory, "time", c)
    return c


def test_a_cost_waits_for_the_request_that_holds_its_place(clock):
    window = RequestWindow(MemoryStorage())
    assert window.hit(5, "c") is not None  # at 1000
    clock.now = 1010.0
    assert window.hit(5, "c", 2) is not None  # 3 of 5
    clock.now = 1020.0
    counted = window.hit(5, "c")  # 4 of 5
    assert not window.fits(5, "c", 2)
    window.give_back(5, "c", counted)  # refused: 3 of 5 again
    assert window.left(5, "c") == 2 and window.fits(5, "c", 2)
    # 4 fit once the two counted at 1010 leave too, not as soon as the one of 1000 does
    assert window.room_at(5, "c", 4) == 1070.0
    assert window.room_at(5, "c", 3) == 1060.0
    clock.now = 1070.5
    assert window.left(5, "c") == 5


def test_costs_as_libretranslate_counts_them():
    assert texts_cost("one text") is None and texts_cost(["one"]) is None
    assert texts_cost(["a", "b", "c"]).requests == 3
    assert [file_cost(n, 40).requests for n in (0, 39, 40, 79, 80, 240)] == [1, 1, 1, 1, 2, 6]
