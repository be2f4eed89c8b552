"""The image as JSON: a stable, documented contract (docs/image-json.md) shared by ``jbod image``, the Spark
tables' as-of query and the tests. Lists are sorted: brokers by id; topics, partitions and replicas by the topic id's
string form, then partition id, then broker id (the order a SQL ``ORDER BY`` on the tables gives)."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import Any

from jbod_model.directory_id import DirectoryState
from jbod_model.image import ClusterImage, MetadataImage, TopicImage
from jbod_model.records.json_codec import PIECE_ROWS, dumps_without_floats
from jbod_model.replicas import offline_reason
from jbod_model.slots import gc_paused
from jbod_model.uuid import Uuid


def image_to_json(image: MetadataImage) -> dict[str, Any]:
    """The image JSON contract (see :func:`_image_to_json`), built with the cyclic collector paused: the document is
    millions of acyclic dicts and lists, and collections triggered while building it would walk them (and the
    image) over and over."""
    with gc_paused():
        return _image_to_json(image)


def _image_to_json(image: MetadataImage) -> dict[str, Any]:
    """The image JSON contract: featureLevel, metadataVersion, lastOffset, brokers, topics, partitions, replicas.

    Linear in the image: topics are sorted once by their id's text and each topic's partitions by id, so partitions
    and replicas come out in contract order without sorting millions of rows; a replica's state is a function of
    (broker, directory) only, and a cluster has few of those, so each is worked out once
    (:func:`jbod_model.replicas.offline_reason` — the replica view's own rule) and each id printed once."""
    mv = image.metadata_version
    brokers = _brokers(image)
    ordered = _ordered_topics(image)
    topics = [{"topicId": text, "name": t.name} for text, t in ordered]
    cluster = image.cluster
    # Keyed by id(): Uuid hashing runs Python code, and every id here is alive in the image for the whole call.
    texts: dict[int, str] = {}
    states: dict[tuple[int, int], tuple[str, str, bool, str | None]] = {}
    partitions: list[dict[str, Any]] = []
    replicas: list[dict[str, Any]] = []
    for text, t in ordered:
        parts = t.partitions
        for pid in sorted(parts):
            p = parts[pid]
            directories = p.directories
            dir_texts = []
            for d in directories:
                dt = texts.get(id(d))
                if dt is None:
                    dt = texts[id(d)] = str(d)
                dir_texts.append(dt)
            partitions.append(
                {"topicId": text, "partitionId": pid, "replicas": list(p.replicas), "isr": list(p.isr),
                 "leader": p.leader, "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
                 "directories": dir_texts, "addingReplicas": list(p.adding_replicas),
                 "removingReplicas": list(p.removing_replicas), "eligibleLeaderReplicas": list(p.elr),
                 "lastKnownElr": list(p.last_known_elr)})
            # The replica view zips replicas with directories strictly (an image never holds arrays of different
            # lengths: PartitionRegistration refuses them), then the contract orders a partition's replicas by
            # broker id; sorted() is stable, as the full sort the contract describes is.
            pairs = list(zip(p.replicas, directories, strict=True))
            if len(pairs) > 1:
                pairs.sort(key=_broker_of)
            for broker_id, directory in pairs:
                key = (broker_id, id(directory))
                state = states.get(key)
                if state is None:
                    state = states[key] = _replica_state(cluster, broker_id, directory)
                replicas.append({"topicId": text, "partitionId": pid, "brokerId": broker_id, "directory": state[0],
                                 "directoryState": state[1], "offline": state[2], "offlineReason": state[3]})
    return {"featureLevel": mv.feature_level, "metadataVersion": mv.name, "lastOffset": image.last_offset,
            "brokers": brokers, "topics": topics, "partitions": partitions, "replicas": replicas}


def image_json_text(doc: dict[str, Any]) -> str:
    """The text of an image JSON document, exactly as :func:`jbod_model.records.json_codec.dumps` writes it: the
    image contract holds no float (:func:`~jbod_model.records.json_codec.dumps_without_floats`)."""
    return dumps_without_floats(doc)


def image_json_text_of(image: MetadataImage, extra: Mapping[str, Any] | None = None) -> str:
    """``image_json_text({**image_to_json(image), **extra})``, the same text, written straight from the image (see
    :func:`_image_json_parts`) with the cyclic collector paused. ``extra`` holds keys the contract adds after the
    image's own (:func:`jbod_model.gaps.consequence_fields`); none of them is one of the image's keys."""
    with gc_paused():
        return "".join(_image_json_parts(image, extra or {}))


def image_json_pieces(image: MetadataImage, extra: Mapping[str, Any] | None = None, *,
                      rows: int = PIECE_ROWS) -> Iterator[str]:
    """The text of :func:`image_json_text_of` in consecutive pieces of ``rows`` parts each, to be written
    one after the other (``jbod image --json``). At 2 M partitions the text is 1.7 GB: joined whole, then encoded
    whole for the output, it took two more copies of it than its rows (5.3 GB peak, docs/performance.md)."""
    with gc_paused():
        parts = _image_json_parts(image, extra or {})
    for lo in range(0, len(parts), rows):
        yield "".join(parts[lo:lo + rows])


def _image_json_parts(image: MetadataImage, extra: Mapping[str, Any]) -> list[str]:
    """The image JSON text without building the document, as the list of its consecutive parts: a second
    implementation of :func:`_image_to_json` plus :func:`image_json_text`, proven equal to them by a hypothesis
    property (tests/properties/test_replay_properties.py).

    The reference builds a dict per partition and per replica (800 k at 200 k partitions) for orjson to walk once;
    here each row is one f-string. What repeats is written once: a partition's ``{"topicId":..,"partitionId":..``
    head is shared by its replica rows, a replica row's tail is a function of (broker, directory) only, and an int
    list's text is a function of its values (most ELR and reassignment lists are the same empty or short tuples).
    The text equals orjson's: ints print as ``str`` does (as both orjson and the ``json`` fallback write them), and
    strings (names, enum values) are written as :func:`image_json_text` writes them, once each."""
    mv = image.metadata_version
    cluster = image.cluster
    ordered = _ordered_topics(image)
    # A replica's (directory JSON string, row tail) by (broker, id(directory)): its state is a function of those.
    tails: dict[tuple[int, int], tuple[str, str]] = {}
    lists = _IntListTexts()
    # Every row starts with its separating comma (the first row's is dropped at the end), so the document is the
    # rows one after the other: no joined copy of each section first (at 200 k partitions those copies were 167 MB).
    partitions: list[str] = []
    replicas: list[str] = []
    add_partition, add_replicas = partitions.append, replicas.append
    for text, t in ordered:
        topic_head = ',{"topicId":' + dumps_without_floats(text) + ',"partitionId":'
        parts = t.partitions
        for pid in sorted(parts):
            p = parts[pid]
            head = f"{topic_head}{pid:d}"
            replica_ids = p.replicas
            dir_texts = []
            row_tails = []
            # As in _image_to_json: zipped strictly, then the replica rows ordered by broker id (stable).
            for broker_id, directory in zip(replica_ids, p.directories, strict=True):
                key = (broker_id, id(directory))
                known = tails.get(key)
                if known is None:
                    text_, state, offline, reason = _replica_state(cluster, broker_id, directory)
                    known = tails[key] = (
                        dumps_without_floats(text_),
                        f',"brokerId":{broker_id:d},"directory":{dumps_without_floats(text_)},'
                        f'"directoryState":{dumps_without_floats(state)},"offline":{dumps_without_floats(offline)},'
                        f'"offlineReason":{dumps_without_floats(reason)}}}')
                dir_texts.append(known[0])
                row_tails.append(known[1])
            add_partition(
                f'{head},"replicas":{lists[replica_ids]},"isr":{lists[p.isr]},"leader":{p.leader:d},'
                f'"leaderEpoch":{p.leader_epoch:d},"partitionEpoch":{p.partition_epoch:d},'
                f'"directories":[{",".join(dir_texts)}],"addingReplicas":{lists[p.adding_replicas]},'
                f'"removingReplicas":{lists[p.removing_replicas]},"eligibleLeaderReplicas":{lists[p.elr]},'
                f'"lastKnownElr":{lists[p.last_known_elr]}}}')
            if row_tails:
                if len(row_tails) > 1 and list(replica_ids) != sorted(replica_ids):
                    row_tails = [tail for _, tail in sorted(zip(replica_ids, row_tails, strict=True), key=_first)]
                # A partition's replica rows as one piece: each is the partition's head (with its comma) + tail.
                add_replicas(head + head.join(row_tails))
    # The small part before the rows: its document's text without the closing brace.
    prefix = dumps_without_floats({
        "featureLevel": mv.feature_level, "metadataVersion": mv.name, "lastOffset": image.last_offset,
        "brokers": _brokers(image), "topics": [{"topicId": text, "name": t.name} for text, t in ordered]})
    if partitions:
        partitions[0] = partitions[0][1:]
    if replicas:
        replicas[0] = replicas[0][1:]
    out = [prefix[:-1], ',"partitions":[', *partitions, '],"replicas":[', *replicas, "]"]
    for name, value in extra.items():
        out.append(f",{dumps_without_floats(name)}:{dumps_without_floats(value)}")
    out.append("}")
    return out


class _IntListTexts(dict[tuple[int, ...], str]):
    """The JSON text of a list of ints, keyed by its values: written once per distinct list (subscripting a dict is
    the cheapest lookup on a hit)."""

    def __missing__(self, values: tuple[int, ...]) -> str:
        # A list's repr in C, less its spaces: ints (the image's are plain ints) print as JSON does.
        text = self[values] = str(list(values)).replace(" ", "")
        return text


#: A (broker id, directory) pair's broker id, as a C-level key function.
_first = operator.itemgetter(0)


def _brokers(image: MetadataImage) -> list[dict[str, Any]]:
    """The contract's broker rows, by id."""
    return [
        {"brokerId": b.id, "brokerEpoch": b.epoch, "incarnationId": str(b.incarnation_id), "fenced": b.fenced,
         "inControlledShutdown": b.in_controlled_shutdown, "logDirs": [str(d) for d in b.directories]}
        for b in sorted(image.cluster.brokers.values(), key=lambda b: b.id)
    ]


def _ordered_topics(image: MetadataImage) -> list[tuple[str, TopicImage]]:
    """Every topic with its id's text, in contract order (by that text)."""
    return sorted(((str(t.id), t) for t in image.topics.by_id.values()), key=lambda pair: pair[0])


def _broker_of(pair: tuple[int, Uuid]) -> int:
    return pair[0]


def _replica_state(cluster: ClusterImage, broker_id: int, directory: Uuid) -> tuple[str, str, bool, str | None]:
    """The JSON fields of a replica's directory state: text, state, offline, reason."""
    reason = offline_reason(cluster, broker_id, directory)
    return str(directory), DirectoryState.of(directory).value, reason is not None, reason.value if reason else None
