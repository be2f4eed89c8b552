"""Where ``jbod check --tables T --no-docs --json`` spends its time and memory, frame by frame (issue #14 item 2:
≤ 4 GiB at 2 M partitions).

Runs the command in this process, its output thrown away, and prints on stderr, after each step of the first
process, the seconds since the start, the resident set now (``VmRSS``) and the peak so far (``ru_maxrss``): each
frame built (and which tables it read first), each frame's validation, the model the frames share, and the tables the
first process holds (their count and the pandas bytes of their columns, strings not counted). The frames built in the
second process (the log suite's) are not watched::

    python benchmarks/check_phases.py TABLES [--cluster C] [--suites S ...]

Compare two checkouts by running this file with ``PYTHONPATH=<checkout>``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from phases import say, watch  # beside this script (run as a script, like every benchmark)

from pipelines.cli.main import app
from pipelines.quality import frames, runner, suites
from pipelines.quality.inputs import TableSet

#: The label's column: frame names are long.
WIDTH = 60


def _held(tables: TableSet) -> str:
    held = sorted(tables.held)
    size = sum(int(tables.table(name).memory_usage(deep=False).sum()) for name in held)
    return f"tables held: {', '.join(held) or 'none'} ({size / 1e6:.0f} MB of columns, strings not counted)"


def _watched_frames() -> None:
    for name, build in list(suites.FRAMES.items()):
        def built(b: Any, build: Callable[..., Any] = build, name: str = name) -> Any:
            say(f"  {_held(b.tables)}", WIDTH)
            before = b.tables.held
            frame = build(b)
            read = sorted(b.tables.held - before)
            say(f"frame {name}" + (f" (read {', '.join(read)})" if read else ""), WIDTH)
            return frame
        suites.FRAMES[name] = built  # type: ignore[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables")
    parser.add_argument("--cluster")
    parser.add_argument("--suites", nargs="*")
    args = parser.parse_args()
    _watched_frames()
    watch(frames, "_model", lambda tables: "the model (Build.model)", WIDTH)
    watch(runner, "_validated", lambda cluster, r, suite, frame, *rest: f"  validated {suite} on {frame.name}",
          WIDTH)
    sys.argv = ["jbod", "check", "--tables", args.tables, "--no-docs", "--json",
                *(["--cluster", args.cluster] if args.cluster else []),
                *[a for s in args.suites or () for a in ("--suite", s)]]
    sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - the results are not what is measured
    try:
        app()
    except SystemExit as e:
        if e.code not in (0, 1, None):
            raise
    finally:
        say("end", WIDTH)


if __name__ == "__main__":
    main()
