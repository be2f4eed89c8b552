"""What ``report_phases.py`` and ``check_phases.py`` share: a line on stderr after each phase of a command run in
process — the seconds since the start, the CPU seconds this process used so far, the resident set now (``VmRSS``)
and the peak so far (``ru_maxrss``) — and a wrapper that prints it when a function returns. Not part of the test
suite."""

from __future__ import annotations

import functools
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

STARTED = time.perf_counter()


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def say(what: str, width: int = 40) -> None:
    print(f"{time.perf_counter() - STARTED:7.1f} s  cpu {time.process_time():5.1f} s  {what:<{width}} "
          f"rss {rss_mb():6.0f} MB  peak {peak_mb():6.0f} MB", file=sys.stderr, flush=True)


def watch(owner: Any, name: str, label: str | Callable[..., str], width: int = 40) -> None:
    """Print the RSS and the peak when ``owner.name`` returns, after ``label`` (or what it says of the call's
    arguments)."""
    function: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(function)
    def watched(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        say(label if isinstance(label, str) else label(*args, **kwargs), width)
        return result

    setattr(owner, name, watched)
