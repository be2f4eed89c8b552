"""CPU of a command's process tree by kind of process, sampled from /proc: where a Spark job's CPU goes between its
Python workers, its JVM and its driver, and how busy the cores are second by second.

    python benchmarks/cpu_by_process.py [--every 0.25] [--timeline FILE] [--memory] -- jbod run --input C/metadata …

Prints the wall time and each kind's CPU seconds on stderr (the command's own output passes through); ``--timeline``
writes a line per second with each kind's CPU in that second (2.0 = both cores of this box busy); ``--memory`` adds
the peak of the tree's proportional set size (Pss, ``/proc/<pid>/smaps_rollup``: shared pages counted once over the
processes sharing them) summed over its processes, each kind's own peak, and each kind's Pss on the timeline. Kinds:
``jvm`` (a java process), ``workers`` (pyspark's worker daemons and what they fork, a check's second process),
``driver`` (any other Python process: the command itself), ``other``. A process that starts and ends between two
samples is not seen: sample often enough for the command at hand (docs/state-design.md, session 27).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
KINDS = ("workers", "jvm", "driver", "other")


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid → (parent pid, CPU ticks used so far, command line), for every process readable now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # after the command's name, which may hold spaces
        out[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), command)
    return out


def kind(command: str) -> str:
    """The kind of process a command line is."""
    program = command.split(" ", 1)[0]
    if program.endswith("java"):
        return "jvm"
    if "pyspark.worker" in command or "daemon" in command or "quality.apart" in command:
        return "workers"
    if "python" in program or "jbod" in command:
        return "driver"
    return "other"


def _pss_mib(pid: int) -> float:
    """A process's proportional set size in MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _tree(root: int, processes: dict[int, tuple[int, int, str]]) -> set[int]:
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, _, _) in processes.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--timeline", type=Path, help="write each second's CPU by kind here")
    parser.add_argument("--memory", action="store_true", help="report the tree's peak Pss, summed and by kind")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    started = time.monotonic()
    proc = subprocess.Popen(command)
    seen: dict[int, int] = {}
    totals: collections.Counter[str] = collections.Counter()
    by_second: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    peak, peaks = 0.0, collections.Counter[str]()
    pss_by_second: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    while proc.poll() is None:
        processes = _processes()
        now = collections.Counter[str]()
        resident = collections.Counter[str]()
        for pid in _tree(proc.pid, processes):
            if pid in processes:
                _, ticks, cmd = processes[pid]
                now[kind(cmd)] += (ticks - seen.get(pid, 0)) / TICKS
                seen[pid] = ticks
                if args.memory:
                    resident[kind(cmd)] += _pss_mib(pid)
        if args.memory:
            peak = max(peak, resident.total())
            second = pss_by_second[int(time.monotonic() - started)]
            for k, mib in resident.items():
                peaks[k] = max(peaks[k], mib)
                second[k] = max(second[k], mib)
        totals.update(now)
        by_second[int(time.monotonic() - started)].update(now)
        time.sleep(args.every)
    wall = time.monotonic() - started
    print(f"wall {wall:.1f} s; CPU " + ", ".join(f"{k} {totals[k]:.1f} s" for k in KINDS if totals[k]),
          file=sys.stderr)
    if args.memory:
        print(f"peak Pss {peak:.0f} MiB; by kind " + ", ".join(f"{k} {peaks[k]:.0f} MiB" for k in KINDS if peaks[k]),
              file=sys.stderr)
    if args.timeline is not None:
        args.timeline.write_text("".join(
            f"{second}\t" + "\t".join(f"{k}={by_second[second][k]:.2f}" for k in KINDS)
            + ("\tpss_mib " + " ".join(f"{k}={pss_by_second[second][k]:.0f}" for k in KINDS) if args.memory else "")
            + "\n" for second in sorted(by_second)), encoding="utf-8")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
