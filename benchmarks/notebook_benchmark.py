"""How long the exploration notebooks take over a set of job tables (issue #14 item 4: ≤ 30 s each at 2 M
partitions), and which of their cells the time goes to.

Runs each notebook as an operator does, one process per notebook::

    jbod notebook NN --param TABLES=T [--param CLUSTER=C] --out DIR/NN.ipynb

and prints its wall seconds and peak memory — the resident memory of the command and its kernel summed, sampled from
``/proc`` every 0.2 s (GNU ``time`` would see the command alone: the kernel is its child, never waited for by
``time``) —, then the slowest cells of the executed notebook, timed by the kernel itself (nbclient records when each
cell started and replied)::

    python benchmarks/notebook_benchmark.py TABLES [--cluster C] [--only 01 02 03] [--cells 4] [--json]

The notebooks only read the tables (notebook 03 runs the checks, which append to ``dq_results``, only when the
tables hold no run of the checks yet or ``--param RUN_CHECKS=True`` asks). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import nbformat

from pipelines.report.notebooks import notebooks

GOAL_SECONDS = 30.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """The resident bytes of ``root`` and every process under it, now (0 for what ended meanwhile)."""
    parents: dict[int, int] = {}
    resident: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as stat:
                parents[int(name)] = int(stat.read().rpartition(")")[2].split()[1])
            with open(f"/proc/{name}/statm", encoding="utf-8") as statm:
                resident[int(name)] = int(statm.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(below)
        tree |= below
    return sum(resident.get(pid, 0) for pid in tree)


def run_sampled(argv: list[str], stderr: IO[bytes]) -> tuple[float, int, int]:
    """Run ``argv`` to its end: wall seconds, the peak of its process tree's resident bytes, its exit code."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.2)
    return time.perf_counter() - started, peak, proc.returncode


def cell_seconds(book: nbformat.NotebookNode) -> list[tuple[float, str]]:
    """Each code cell's seconds (the kernel's reply less the cell's start) and its first line, in the book's order."""
    out = []
    for cell in book.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        began, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type != "code" or began is None or ended is None:
            continue
        seconds = (datetime.fromisoformat(ended.replace("Z", "+00:00"))
                   - datetime.fromisoformat(began.replace("Z", "+00:00"))).total_seconds()
        first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
        out.append((seconds, first.strip()[:70]))
    return out


def measure(name: str, tables: Path, cluster: str | None, folder: Path) -> dict[str, Any]:
    """Run notebook ``name`` over ``tables``: its wall time, peak RSS, exit code and the cells' times."""
    out = folder / f"{name}.ipynb"
    argv = [sys.executable, "-m", "pipelines.cli", "notebook", name, "--param", f"TABLES={tables}",
            "--param", f"WORKDIR={folder / 'work' / name}", "--out", str(out)]
    if cluster is not None:
        argv += ["--param", f"CLUSTER={cluster}"]
    with tempfile.NamedTemporaryFile() as stderr:
        seconds, peak, code = run_sampled(argv, stderr)
        stderr.seek(0)
        error = stderr.read().decode(errors="replace").strip().splitlines()[-1:] if code else []
    cells = cell_seconds(nbformat.read(out, as_version=4)) if out.exists() else []
    return {"notebook": name, "seconds": round(seconds, 2), "rss_mb": round(peak / 2**20),
            "returncode": code, "error": error[0] if error else None,
            "cells": [{"seconds": round(s, 2), "cell": c} for s, c in cells]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", type=Path)
    parser.add_argument("--cluster", default=None, help="With tables of several clusters: which one.")
    parser.add_argument("--only", nargs="+", default=None, metavar="NN",
                        help="Notebooks by number or name prefix (default: every notebook).")
    parser.add_argument("--cells", type=int, default=4, help="The slowest cells shown per notebook.")
    parser.add_argument("--json", action="store_true", help="Print JSON only.")
    args = parser.parse_args()
    names = [p.stem for p in notebooks()
             if args.only is None or any(p.stem.startswith(prefix) for prefix in args.only)]
    results = []
    with tempfile.TemporaryDirectory(prefix="jbod-notebooks-") as scratch:
        for name in names:
            result = measure(name, args.tables.resolve(), args.cluster, Path(scratch))
            results.append(result)
            if not args.json:
                verdict = "ok" if result["seconds"] <= GOAL_SECONDS else f"over the {GOAL_SECONDS:.0f} s goal"
                print(f"{name}: {result['seconds']:.1f} s, {result['rss_mb']} MB peak, exit {result['returncode']} "
                      f"({verdict})" + (f" — {result['error']}" if result["error"] else ""))
                for cell in sorted(result["cells"], key=lambda c: -c["seconds"])[:args.cells]:
                    print(f"    {cell['seconds']:7.2f} s  {cell['cell']}")
    if args.json:
        print(json.dumps({"tables": str(args.tables), "goal_seconds": GOAL_SECONDS, "notebooks": results}, indent=2))
    return 1 if any(r["returncode"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
