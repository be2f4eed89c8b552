"""The image as JSON: a stable, documented contract (docs/image-json.md) shared by ``jbod image``, the Spark
tables' as-of query and the tests. Lists are sorted: brokers by id; topics, partitions and replicas by the topic id's
string form, then partition id, then broker id (the order a SQL ``ORDER BY`` on the tables gives)."""

from __future__ import annotations

from typing import Any

from jbod_model.image import MetadataImage
from jbod_model.replicas import replica_view


def image_to_json(image: MetadataImage) -> dict[str, Any]:
    """The image JSON contract: featureLevel, metadataVersion, lastOffset, brokers, topics, partitions, replicas."""
    mv = image.metadata_version
    brokers = [
        {"brokerId": b.id, "brokerEpoch": b.epoch, "incarnationId": str(b.incarnation_id), "fenced": b.fenced,
         "inControlledShutdown": b.in_controlled_shutdown, "logDirs": [str(d) for d in b.directories]}
        for b in sorted(image.cluster.brokers.values(), key=lambda b: b.id)
    ]
    topics = sorted(({"topicId": str(t.id), "name": t.name} for t in image.topics.by_id.values()),
                    key=lambda t: t["topicId"])
    partitions = sorted(
        ({"topicId": str(t.id), "partitionId": pid, "replicas": list(p.replicas), "isr": list(p.isr),
          "leader": p.leader, "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
          "directories": [str(d) for d in p.directories], "addingReplicas": list(p.adding_replicas),
          "removingReplicas": list(p.removing_replicas), "eligibleLeaderReplicas": list(p.elr),
          "lastKnownElr": list(p.last_known_elr)}
         for t, pid, p in image.topics.partitions()),
        key=lambda p: (p["topicId"], p["partitionId"]))
    replicas = sorted(
        ({"topicId": str(r.topic_id), "partitionId": r.partition_id, "brokerId": r.broker_id,
          "directory": str(r.directory), "directoryState": r.directory_state.value, "offline": r.offline,
          "offlineReason": r.offline_reason.value if r.offline_reason else None}
         for r in replica_view(image)),
        key=lambda r: (r["topicId"], r["partitionId"], r["brokerId"]))
    return {"featureLevel": mv.feature_level, "metadataVersion": mv.name, "lastOffset": image.last_offset,
            "brokers": brokers, "topics": topics, "partitions": partitions, "replicas": replicas}
