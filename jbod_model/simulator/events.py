"""The simulated clock and its event queue: callbacks run in (time, insertion) order, so a run is deterministic.

This plays the role of the ``KafkaEventQueue`` threads and ``Time`` of every simulated process at once: each
deferred event (``scheduleDeferred``) is one entry; cancelling a :class:`Timer` is ``cancelDeferred``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

Callback = Callable[[], None]


@dataclass(slots=True)
class Timer:
    """A handle on one scheduled event; :meth:`cancel` makes it a no-op when its time comes."""

    at_ms: int
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(slots=True)
class EventQueue:
    """A priority queue of callbacks keyed by simulated time in milliseconds (ties run in scheduling order)."""

    now_ms: int = 0
    _heap: list[tuple[int, int, Timer, Callback]] = field(default_factory=list)
    _seq: int = 0
    #: How many callbacks have run (for statistics).
    executed: int = 0

    def schedule(self, at_ms: int, callback: Callback) -> Timer:
        """Run ``callback`` at ``at_ms`` (not before the current time)."""
        at = max(at_ms, self.now_ms)
        timer = Timer(at)
        heapq.heappush(self._heap, (at, self._seq, timer, callback))
        self._seq += 1
        return timer

    def after(self, delay_ms: int, callback: Callback) -> Timer:
        """Run ``callback`` ``delay_ms`` from now."""
        return self.schedule(self.now_ms + max(delay_ms, 0), callback)

    def next_time(self) -> int | None:
        """The time of the next live event, if any."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def run_until(self, until_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run every event due at or before ``until_ms``, then move the clock to ``until_ms``. With ``stop``, return
        True as soon as it holds after an event (the clock stays at that event's time)."""
        heap = self._heap
        while heap and heap[0][0] <= until_ms:
            at, _seq, timer, callback = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self.now_ms = at
            self.executed += 1
            callback()
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, until_ms)
        return False

    def __len__(self) -> int:
        return len(self._heap)
