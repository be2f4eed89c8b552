"""``jbod image``, ``jbod controller`` and ``jbod inspect``: decode and replay metadata with the reference model —
the image of INPUT (or of the Spark job's tables), a stream of controller requests run, one file's records.

:func:`register` adds the commands to the ``jbod`` app (``pipelines.cli.main``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer

from jbod_model.errors import InputError
from jbod_model.gaps import consequence_fields, with_consequences
from jbod_model.image_json import image_json_pieces, image_json_text, image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import Slices, dumps, dumps_pieces
from jbod_model.sources import InputKind, detect_kind, open_inputs
from jbod_model.storage.dump_format import dump_file
from jbod_model.storage.log_reader import read_entries
from jbod_model.stream import entry_to_json
from pipelines.cli import shared
from pipelines.cli.shared import AsOfOpt, InputsArg, JsonOpt, PolicyOpt
from pipelines.report.load import resolve_as_of


def _rows(value: list[dict[str, Any]] | Slices) -> Iterator[dict[str, Any]]:
    """A list of the image document, whole or as :class:`~jbod_model.records.json_codec.Slices` of rows."""
    if isinstance(value, Slices):
        for part in value.slices:
            yield from part  # type: ignore[misc]  # the tables' slices of rows, never of text here
    else:
        yield from value


def _print_image(doc: dict[str, Any]) -> None:
    """The image JSON contract (docs/image-json.md) as terminal tables: it is the one shape every source gives. Its
    lists may be :class:`~jbod_model.records.json_codec.Slices` (from the tables): the partitions are counted and
    the replicas read for the offline ones a slice at a time, never held whole (8 M rows at 2 M partitions)."""
    partitions = sum(1 for _ in _rows(doc["partitions"]))
    replicas = 0
    offline = []
    for r in _rows(doc["replicas"]):
        replicas += 1
        if r["offline"]:
            offline.append(r)
    topics = list(_rows(doc["topics"]))
    shared.console().print(f"metadata.version [bold]{doc['metadataVersion']}[/] (level {doc['featureLevel']}), "
                     f"last offset {doc['lastOffset']}, {len(topics)} topics, {partitions} "
                     f"partitions, {replicas} replicas", highlight=False)
    brokers = shared.table("Brokers", "broker", "epoch", "fenced", "controlled shutdown", "online log dirs")
    for b in _rows(doc["brokers"]):
        brokers.add_row(str(b["brokerId"]), str(b["brokerEpoch"]), str(b["fenced"]).lower(),
                        str(b["inControlledShutdown"]).lower(), "\n".join(b["logDirs"]) or "(all: pre-3.7-IV2)")
    shared.console().print(brokers)
    names = {t["topicId"]: t["name"] for t in topics}
    if not offline:
        shared.console().print("No offline replicas.")
        return
    table = shared.table(f"Offline replicas ({len(offline)})", "topic", "partition", "broker", "directory", "state",
                   "reason")
    for r in offline:
        table.add_row(names.get(r["topicId"], r["topicId"]), str(r["partitionId"]), str(r["brokerId"]),
                      r["directory"], r["directoryState"], r["offlineReason"] or "")
    shared.console().print(table)


def image(inputs: Annotated[list[Path] | None, typer.Argument(
              help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                   "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                   "--tables.", show_default=False)] = None,
          as_of_offset: shared.AsOfOffsetOpt = None,
          until_offset: shared.UntilOffsetOpt = None,
          full_log: Annotated[bool, typer.Option(
              "--full-log", help="For a metadata dir: replay the whole log instead of the latest snapshot plus "
                                 "the log after it.")] = False,
          tables: Annotated[Path | None, typer.Option(
              "--tables", help="Read the image from the Spark job's Delta tables instead of replaying INPUT.")]
          = None,
          cluster: Annotated[str | None, typer.Option(
              "--cluster", help="With --tables: the cluster (optional when the tables hold one).")] = None,
          as_of: AsOfOpt = None,
          as_json: JsonOpt = False, policy: PolicyOpt = "fail") -> None:
    """Replay INPUT (or read the Delta tables) and print the metadata image: brokers, online dirs, offline replicas.

    With [bold]--json[/] the output is the image JSON contract (docs/image-json.md), the same from a replay and from
    the tables. Requests in a JSONL input are run through the reference controller.
    """
    with shared.fail(), ExitStack() as reading:
        as_of_offset = shared.as_of_offset(as_of_offset, until_offset)
        shared.check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of": as_of},
                     input_only={"--full-log": full_log,
                                 "--policy": None if policy == "fail" else policy})
        if tables is not None:
            from pipelines.lakehouse.tables import (  # noqa: PLC0415 - pyarrow/deltalake when asked
                as_of_image_sliced,
                one_version,
                resolve_cluster,
            )

            # Every read at one version of each table, to the image's last slice printed.
            reading.enter_context(one_version())
            cid = resolve_cluster(tables, cluster)
            n = resolve_as_of(tables, cid, as_of_offset, as_of)
            if as_json:
                # Its rows made a slice at a time as they are written, in pieces, as the log's image below: the
                # document was 8 M dicts and its text 1.7 GB at 2 M partitions (docs/performance.md). The slices'
                # text is made by Arrow's kernels from the columns, on every core (lakehouse/jsontext.py).
                for piece in dumps_pieces(as_of_image_sliced(tables, cid, n, text=True)):
                    sys.stdout.write(piece)
                sys.stdout.write("\n")
                return
            doc = as_of_image_sliced(tables, cid, n)
        else:
            loaded = open_inputs(inputs or [], policy=shared.policy(policy),
                                 until_offset=shared.until_offset(as_of_offset),
                                 from_snapshot=not full_log)
            runner = shared.stream_runner(loaded)
            with loaded.replaying():
                for _event in runner.run(shared.tracked(loaded.entries, "decoding and replaying")):
                    pass  # requests in JSONL inputs are run; only the final image is printed here
            shared.report_skips(loaded)
            if as_json:
                # The text straight from the image: the same as the document's (a property test proves it), without
                # building 800 k dicts at 200 k partitions; written in pieces, never joined whole (1.7 GB at 2 M).
                out = sys.stdout
                for piece in image_json_pieces(runner.image, consequence_fields(loaded.consequences)):
                    out.write(piece)
                out.write("\n")
                return
            doc = with_consequences(image_to_json(runner.image), loaded.consequences)
        if as_json:
            print(image_json_text(doc))
        else:
            _print_image(doc)


def controller(inputs: InputsArg,
               cluster_id: Annotated[str | None, typer.Option(
                   "--cluster-id", help="The controller's cluster id; without it any registration's cluster id "
                                        "is accepted.")] = None,
               as_json: JsonOpt = False) -> None:
    """Run a mixed stream of committed records and controller requests through the reference controller.

    Prints one JSON line per request — {"offset", "type", "response", "records"} — then the final image (a JSON
    line with [bold]--json[/], tables otherwise).
    """
    with shared.fail():
        loaded = open_inputs(inputs)
        runner = shared.stream_runner(loaded, cluster_id)
        for event in runner.run(shared.tracked(loaded.entries, "running the controller")):
            print(dumps(event.to_json()))
        doc = image_to_json(runner.image)
        if as_json:
            print(dumps(doc))
        else:
            _print_image(doc)


def inspect(path: Annotated[Path, typer.Argument(help="A segment, snapshot, bootstrap.checkpoint, dump text or "
                                                      "JSONL file.", show_default=False)],
            as_json: Annotated[bool, typer.Option(
                "--json", help="Canonical JSONL (one record per line, with offsets) instead of dump-log text.")]
            = False,
            policy: PolicyOpt = "fail") -> None:
    """Print the records of a file the way kafka-dump-log --cluster-metadata-decoder does, or as JSONL."""
    with shared.fail():
        kind = detect_kind(path)
        pol = shared.policy(policy)
        if kind in (InputKind.SEGMENT, InputKind.SNAPSHOT, InputKind.BOOTSTRAP):
            if as_json:
                for entry in read_entries(path, policy=pol):
                    if isinstance(entry, LogEntry):  # control records are not metadata records
                        print(dumps(entry_to_json(entry)))
            else:
                for line in dump_file(path, policy=pol):
                    print(line)
            return
        if kind is InputKind.METADATA_DIR:
            raise InputError(f"{path} is a directory: inspect one file (or use 'jbod image {path}')")
        loaded = open_inputs([path], policy=pol)
        for item in loaded.entries:
            print(dumps(entry_to_json(item)))
        shared.report_skips(loaded)


def register(app: typer.Typer) -> None:
    """Add ``image``, ``controller`` and ``inspect`` to ``app``."""
    app.command()(image)
    app.command()(controller)
    app.command()(inspect)
