"""``jbod simulate``: run the cluster simulator (``jbod_model.simulator``) and write its outputs.

* ``jbod simulate SCENARIO --out DIR [--seed N]`` — a named scenario (``--list`` shows them);
* ``jbod simulate --brokers B --dirs D --partitions P [--topics T] [--rf R] [--failures F] --out DIR`` — a cluster of
  that size, optionally with F random disk failures;
* ``jbod simulate --brokers B --dirs D --partitions P --workload churn --operations N --out DIR`` — the same cluster
  (placed directly, no simulated clock) followed by N churn operations: ISR changes, disk failures, fencing, restarts,
  LOST assignments, reassignments, moves, topic deletions, configs, transactions and NoOps
  (``jbod_model.simulator.churn``; what the benchmarks generate, fast at 200k partitions);
* ``jbod simulate --random N --out DIR`` — a random fault schedule of N operations (what the property tests run).

The outputs (stream.jsonl, records.jsonl, the metadata log's segments and snapshot, meta.properties per simulated
disk, the ground-truth timeline) are streamed to ``--out`` as the run goes; see docs/simulator.md. Exit codes: 0 done,
1 with ``--strict`` when a property or invariant broke that the scenario does not expect, 2 bad usage or a scenario
the cluster refused.

Wired into the ``jbod`` app by :func:`register`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from jbod_model.errors import JbodError
from jbod_model.metadata_version import LATEST_PRODUCTION, MetadataVersion
from jbod_model.simulator.checks import explain
from jbod_model.simulator.churn import ChurnSpec, churn_run
from jbod_model.simulator.cluster import Simulation, SimulationError
from jbod_model.simulator.config import SimulationConfig
from jbod_model.simulator.generator import RandomRunSpec, random_run, sized_run
from jbod_model.simulator.output import (
    DEFAULT_SEGMENT_BYTES,
    OutputPaths,
    OutputWriter,
    SimulationResult,
    prepare_output_dir,
    write_result,
)
from jbod_model.simulator.scenarios import SCENARIOS, Scenario
from pipelines.cli import shared
from pipelines.cli.shared import EXIT_INPUT

EXIT_VIOLATION = 1
#: ``--workload`` values: the simulator\'s creation only, or the churn workload.
WORKLOADS = ("none", "churn")


def _fail(message: str) -> typer.Exit:
    shared.console(stderr=True).print(f"[bold red]{shared.ERROR_PREFIX}[/] {message}", highlight=False)
    return typer.Exit(EXIT_INPUT)


def _list(as_json: bool) -> None:
    if as_json:
        print(json.dumps([{"name": s.name, "description": s.description, "pains": list(s.pains),
                           "expectedViolations": sorted(p.value for p in s.expected_violations),
                           "expectedInvariants": sorted(s.expected_invariants)} for s in SCENARIOS.values()]))
        return
    # What each scenario reproduces (the issue ids of docs/simulator.md) is for the docs and --json, not here.
    table = shared.table("Scenarios", "scenario", "what happens", "expected to break")
    for s in SCENARIOS.values():
        expected = sorted([p.value for p in s.expected_violations] + sorted(s.expected_invariants))
        table.add_row(s.name, s.description, ", ".join(expected) or "-")
    shared.console().print(table)


def _report(result: SimulationResult, paths: OutputPaths, scenario: Scenario | None, as_json: bool,
            log_bytes: int) -> bool:
    """Print what the run produced; return True when everything that broke was expected."""
    expected_props = scenario.expected_violations if scenario is not None else frozenset()
    expected_invs = scenario.expected_invariants if scenario is not None else frozenset()
    unexpected = [v for v in result.violations if v.property not in expected_props]
    errors = [v for v in result.invariant_violations
              if v.severity.value == "ERROR" and v.invariant not in expected_invs]
    ok = not unexpected and not errors
    open_intervals = sum(1 for i in result.timeline if i.is_open)
    doc: dict[str, Any] = {
        "scenario": result.name, "seed": result.seed, "clusterId": result.cluster_id,
        "metadataVersion": str(result.image.metadata_version), "simulatedMs": result.end_time_ms,
        "quiescent": result.quiescent, "lastOffset": result.stats.last_offset, "batches": result.stats.batches,
        "records": sum(result.stats.records.values()), "requests": sum(result.stats.requests.values()),
        "logBytes": log_bytes, "segments": [str(p) for p in paths.segments],
        "snapshot": str(paths.snapshot) if paths.snapshot is not None else None,
        "stream": str(paths.stream), "recordsJsonl": str(paths.records), "timeline": str(paths.timeline),
        "metaProperties": len(paths.meta_properties), "offlineIntervals": len(result.timeline),
        "openOfflineIntervals": open_intervals,
        "violations": [str(v) for v in result.violations],
        "unexpectedViolations": [str(v) for v in unexpected],
        "unexpectedInvariantErrors": [v.message for v in errors],
    }
    if as_json:
        print(json.dumps(doc))
        return ok
    console = shared.console()
    console.print(f"[bold]{result.name}[/] (seed {result.seed}): {result.description}", highlight=False)
    state = "quiescent" if result.quiescent else "NOT quiescent"
    console.print(f"cluster {result.cluster_id}, metadata.version {doc['metadataVersion']}, "
                  f"{len(result.config.brokers)} brokers, {len(result.image.topics.by_id)} topics; "
                  f"{result.end_time_ms / 1000:.1f} s simulated, {state}", highlight=False)
    table = shared.table(f"Written to {paths.root}", "output", "what")
    table.add_row("metadata/__cluster_metadata-0", f"{len(paths.segments)} segment(s), {log_bytes:,} bytes, offsets "
                                                   f"0..{result.stats.last_offset}; snapshot "
                                                   f"{paths.snapshot.name if paths.snapshot else '-'}")
    table.add_row(paths.stream.name, f"{doc['requests']} requests + records committed outside requests")
    table.add_row(paths.records.name, f"{doc['records']} records in {result.stats.batches} batches")
    table.add_row(paths.timeline.name, f"{len(result.timeline)} offline interval(s), {open_intervals} still open")
    table.add_row("broker-*/*/meta.properties", f"{len(paths.meta_properties)} disk(s)")
    console.print(table)
    if result.violations or errors:
        known = explain(result.log or (), result.directories, unexpected,
                        [v for v in result.invariant_violations if v.invariant not in expected_invs])
        for v in result.violations:
            tag = "expected" if v.property in expected_props else "[red]unexpected[/]"
            console.print(f"  {tag}: {v}", highlight=False)
        for iv in errors:
            console.print(f"  [red]invariant[/]: {iv.message}", highlight=False)
        if known.known:
            console.print(f"  known Kafka issues: {dict(known.known)}", highlight=False)
    else:
        console.print("Every property and invariant held.")
    return ok


def simulate(
    scenario: Annotated[str | None, typer.Argument(
        help="A named scenario (see --list). Without one, a cluster is generated from --brokers/--dirs/--partitions "
             "(or a random fault schedule with --random).", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Directory to write the outputs to.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the run (same seed, same output).")] = 0,
    brokers: Annotated[int, typer.Option("--brokers", help="Brokers of a generated cluster.")] = 3,
    dirs: Annotated[int, typer.Option("--dirs", help="Log dirs per broker of a generated cluster.")] = 3,
    partitions: Annotated[int, typer.Option("--partitions", help="Partitions of a generated cluster.")] = 12,
    topics: Annotated[int, typer.Option("--topics", help="Topics of a generated cluster (0: ~1000 partitions "
                                                         "each).")] = 0,
    replication_factor: Annotated[int, typer.Option("--rf", "--replication-factor",
                                                    help="Replication factor of a generated cluster.")] = 3,
    failures: Annotated[int, typer.Option("--failures", help="Random disk failures after the topics are "
                                                             "created.")] = 0,
    workload: Annotated[str, typer.Option("--workload", help="What a generated cluster does after its topics exist: "
                                                             "'none' (the simulator creates them, then --failures), "
                                                             "or 'churn' (--operations random operations).")] = "none",
    operations: Annotated[int, typer.Option("--operations", help="Churn operations (with --workload churn).")] = 10_000,
    noop_share: Annotated[float, typer.Option("--noop-share", help="Share of churn operations that are NoOpRecords."
                                              )] = 0.3,
    restart_weight: Annotated[float, typer.Option("--restart-weight", help="Weight of broker restarts among the "
                                                  "churn operations (the eleven others weigh 1 each).")] = 0.5,
    reassign_weight: Annotated[float, typer.Option("--reassign-weight", help="Weight of partition reassignments "
                                                   "among the churn operations.")] = 1.0,
    delete_weight: Annotated[float, typer.Option("--delete-weight", help="Weight of topic deletions (each followed "
                                                 "by a topic of the same size) among the churn operations.")] = 1.0,
    metadata_version: Annotated[str | None, typer.Option(
        "--metadata-version", help="The metadata.version a churn workload's log starts at: a release name (3.9-IV0, "
                                   "4.0-IV0 …) or a feature level. From 4.0 the partition records are written at "
                                   "version 2, as Kafka 4.x writes them. [default: 3.9-IV0]",
        show_default=False)] = None,
    random_ops: Annotated[int, typer.Option("--random", help="Instead: a random fault schedule of this many "
                                                             "operations on --brokers × --dirs.")] = 0,
    segment_bytes: Annotated[int, typer.Option("--segment-bytes", help="Roll metadata log segments at this "
                                                                       "size.")] = DEFAULT_SEGMENT_BYTES,
    list_scenarios: Annotated[bool, typer.Option("--list", help="List the scenarios and exit.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when a property or invariant broke that the "
                                                          "run does not expect.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON instead of tables.")] = False,
) -> None:
    """Simulate a KRaft cluster with JBOD log dirs and write its metadata log, request stream, meta.properties and
    ground-truth offline timeline.

    [bold]jbod simulate SCENARIO --out DIR[/] runs a named scenario; [bold]jbod simulate --brokers B --dirs D
    --partitions P --out DIR[/] generates a cluster; [bold]--list[/] shows the scenarios.
    """
    if list_scenarios:
        _list(as_json)
        return
    if out is None:
        raise _fail("--out DIR is required")
    if workload not in WORKLOADS:
        raise _fail(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
    if metadata_version is not None and (scenario is not None or random_ops > 0 or workload != "churn"):
        raise _fail("--metadata-version applies to a generated cluster's churn workload (--workload churn)")
    chosen: Scenario | None = None
    if scenario is not None:
        chosen = SCENARIOS.get(scenario)
        if chosen is None:
            raise _fail(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    try:
        prepare_output_dir(out)
        if chosen is not None or random_ops > 0:
            # Small runs are kept in memory, so that known Kafka issues can be recognised in their log.
            result = chosen.run(seed) if chosen is not None else random_run(
                seed, RandomRunSpec(brokers=brokers, dirs=dirs, operations=random_ops))
            paths = write_result(result, out, segment_bytes=segment_bytes)
        elif workload == "churn":
            spec = ChurnSpec(brokers=brokers, dirs_per_broker=dirs, partitions=partitions,
                             topics=topics if topics > 0 else max(1, -(-partitions // 1000)),
                             replication_factor=replication_factor, operations=operations, noop_share=noop_share,
                             restart_weight=restart_weight, reassign_weight=reassign_weight,
                             delete_weight=delete_weight, seed=seed,
                             metadata_version=(LATEST_PRODUCTION if metadata_version is None
                                               else MetadataVersion.from_name(metadata_version)).feature_level,
                             first_offset=1)  # offset 0: the quorum leader's LEADER_CHANGE control batch
            churn_config = SimulationConfig.uniform(brokers=brokers, dirs=dirs, start_time_ms=spec.start_time_ms)
            writer = OutputWriter(out, churn_config, segment_bytes=segment_bytes)
            result = churn_run(spec, writer, name="generated")
            paths = writer.finish(result)
        else:
            # A generated cluster may be large: its log is streamed to disk as it is committed.
            config = SimulationConfig.uniform(brokers=brokers, dirs=dirs)
            writer = OutputWriter(out, config, segment_bytes=segment_bytes)
            sim: Simulation = sized_run(brokers=brokers, dirs=dirs, partitions=partitions, topics=topics,
                                        replication_factor=replication_factor, seed=seed, failures=failures,
                                        sink=writer, config=config)
            result = sim.result()
            paths = writer.finish(result)
    except (SimulationError, JbodError, ValueError) as e:
        raise _fail(str(e)) from None
    log_bytes = sum(segment.stat().st_size for segment in paths.segments)
    ok = _report(result, paths, chosen, as_json, log_bytes)
    if strict and not ok:
        raise typer.Exit(EXIT_VIOLATION)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app`` (the ``jbod`` CLI)."""
    app.command(name="simulate")(simulate)
