"""Where ``jbod report --tables T --json`` spends its time and memory, phase by phase (issue #14 item 1: ≤ 2 GiB).

Runs the command in this process, its output thrown away, and prints on stderr, after each phase, the seconds since
the start, the resident set now (``VmRSS``) and the peak so far (``ru_maxrss``)::

    python benchmarks/report_phases.py TABLES [--cluster C] [--as-of-offset N]

The phases, in the order the command runs them: the observed batches (``observed_from_tables``), the partitions'
versions (``TablePartitions``), the sparse tracker's run, the offline intervals, the history, the leaderless
partitions, the image (``metadata_image``), ``build_report``, the JSON document (its long lists are made while it is
written, so "end" is after the text). Each phase is timed by wrapping its function; nothing else changes. Compare
two checkouts by running this file with ``PYTHONPATH=<checkout>``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys

from phases import say, watch  # beside this script (run as a script, like every benchmark)

import jbod_model.report as model_report
import pipelines.cli.report as cli_report
from pipelines.cli.main import app
from pipelines.lakehouse import tables
from pipelines.report import load, render


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables")
    parser.add_argument("--cluster")
    parser.add_argument("--as-of-offset", type=int)
    args = parser.parse_args()
    for owner, name, label in (
            (load, "observed_from_tables", "observed batches"),
            (load.TablePartitions, "__init__", "partitions' versions (TablePartitions)"),
            (model_report.SparseIncidentTracker, "run", "tracker's run"),
            (load, "offline_spans", "offline intervals"),
            (model_report.IncidentTracker, "history", "history"),
            (load, "leaderless_from_tables", "leaderless partitions"),
            (tables, "metadata_image", "image"),
            (cli_report, "build_report", "build_report"),
            (render, "report_to_json", "JSON document (its lists still to make)")):
        watch(owner, name, label)
    sys.argv = ["jbod", "report", "--tables", args.tables, "--json",
                *(["--cluster", args.cluster] if args.cluster else []),
                *(["--as-of-offset", str(args.as_of_offset)] if args.as_of_offset is not None else [])]
    sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - the report's text is not what is measured
    try:
        app()
    except SystemExit as e:
        if e.code:
            raise
    finally:
        say("end (the JSON written)")


if __name__ == "__main__":
    main()
