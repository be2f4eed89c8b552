"""What if this disk failed now? Runs the reference controller's directory-failure handling on an image and
reports what every affected partition would look like afterwards.

The records are exactly those ``ReplicationControlManager.handleDirectoriesOffline`` would write if the owning broker
reported the directories in its next heartbeat (R5.3): each partition with a replica on a failed directory loses that
broker from its ISR and leadership, then one BrokerRegistrationChangeRecord drops the directories. Nothing is
changed: the result carries the records and the image they would produce.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from jbod_model.controller.context import ControllerConfig, ControllerContext
from jbod_model.controller.replication_control import handle_directories_offline
from jbod_model.errors import InputError
from jbod_model.image import MetadataImage, TopicsImage
from jbod_model.records.metadata import NO_LEADER, Record
from jbod_model.replay import MetadataDelta
from jbod_model.uuid import Uuid


@dataclass(frozen=True, slots=True)
class PartitionImpact:
    """One partition with a replica on a failed directory, before and after the controller reacts."""

    topic_id: Uuid
    topic_name: str
    partition_id: int
    broker_id: int
    directory: Uuid
    leader_before: int
    leader_after: int
    isr_before: tuple[int, ...]
    isr_after: tuple[int, ...]
    min_isr: int

    @property
    def loses_leader(self) -> bool:
        """The failed replica was the leader (leadership moves, or the partition goes offline)."""
        return self.leader_before == self.broker_id

    @property
    def offline_after(self) -> bool:
        """No leader afterwards: the partition is unavailable."""
        return self.leader_after == NO_LEADER

    @property
    def under_min_isr_after(self) -> bool:
        """Fewer in-sync replicas than ``min.insync.replicas`` afterwards (acks=all producers fail)."""
        return len(self.isr_after) < self.min_isr

    @property
    def was_under_min_isr(self) -> bool:
        return len(self.isr_before) < self.min_isr


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    """The directories assumed failed (grouped by broker), the records the controller would write, the image
    afterwards, and every affected partition."""

    failed: tuple[tuple[int, Uuid], ...]
    records: tuple[Record, ...]
    image_after: MetadataImage
    impacts: tuple[PartitionImpact, ...]

    @property
    def lose_leader(self) -> tuple[PartitionImpact, ...]:
        return tuple(i for i in self.impacts if i.loses_leader)

    @property
    def go_offline(self) -> tuple[PartitionImpact, ...]:
        return tuple(i for i in self.impacts if i.offline_after)

    @property
    def go_under_min_isr(self) -> tuple[PartitionImpact, ...]:
        return tuple(i for i in self.impacts if i.under_min_isr_after and not i.was_under_min_isr)


def what_if_directories_fail(image: MetadataImage, directories: Sequence[Uuid],
                             config: ControllerConfig | None = None) -> WhatIfResult:
    """The effect of ``directories`` failing now. Each must be an online directory of some broker (a directory's
    owner is the broker whose registration lists it); the failures of one broker are reported together, as its
    heartbeat would carry them.

    Of the partitions it reads only those with a replica in one of ``directories`` (the controller's
    ``partitions_in_directory``, and the impacts): the same result comes from :func:`affected_image`'s image, which
    holds only those partitions (beside every broker, topic, feature and configuration) — what a caller with a
    large cluster builds instead of the whole image."""
    cfg = config or ControllerConfig()
    by_broker: dict[int, list[Uuid]] = {}
    for directory in directories:
        owner = image.cluster.directory_owner(directory)
        if owner is None:
            raise InputError(f"Directory {directory} is not an online directory of any registered broker")
        by_broker.setdefault(owner, []).append(directory)
    records: list[Record] = []
    image_after = image
    for broker_id in sorted(by_broker):
        # Each broker's report is one heartbeat, handled against the state the previous one left.
        ctx = ControllerContext(image=image_after, config=cfg, next_write_offset=image_after.last_offset + 1)
        reg = image_after.cluster.brokers[broker_id]
        batch = handle_directories_offline(ctx, broker_id, reg.epoch, by_broker[broker_id])
        delta = MetadataDelta(image_after)
        for i, record in enumerate(batch):
            delta.replay(record, image_after.last_offset + 1 + i)
        image_after = delta.apply()
        records.extend(batch)
    base_ctx = ControllerContext(image=image, config=cfg)
    impacts = []
    for topic in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        min_isr = base_ctx.topic_effective_min_isr(topic.name)
        for pid in sorted(topic.partitions):
            before = topic.partitions[pid]
            for broker_id, dirs in by_broker.items():
                if broker_id not in before.replicas or before.directory(broker_id) not in dirs:
                    continue
                after = image_after.topics.by_id[topic.id].partitions[pid]
                impacts.append(PartitionImpact(
                    topic_id=topic.id, topic_name=topic.name, partition_id=pid, broker_id=broker_id,
                    directory=before.directory(broker_id), leader_before=before.leader, leader_after=after.leader,
                    isr_before=before.isr, isr_after=after.isr, min_isr=min_isr))
    failed = tuple((b, d) for b in sorted(by_broker) for d in sorted(by_broker[b]))
    return WhatIfResult(failed=failed, records=tuple(records), image_after=image_after, impacts=tuple(impacts))


def affected_image(image: MetadataImage, directories: Collection[Uuid]) -> MetadataImage:
    """``image`` with only the partitions that have a replica in one of ``directories`` (every topic stays, some
    with fewer partitions or none): enough for :func:`what_if_directories_fail` of those directories, which gives
    the same result over it as over ``image``."""
    wanted = frozenset(directories)
    topics = {tid: replace(topic, partitions={pid: p for pid, p in topic.partitions.items()
                                              if not wanted.isdisjoint(p.directories)})
              for tid, topic in image.topics.by_id.items()}
    return replace(image, topics=TopicsImage(topics, dict(image.topics.by_name)))
