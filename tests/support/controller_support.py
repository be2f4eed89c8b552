"""Test harness for the reference controller: a small cluster driver in the spirit of Kafka's
``ReplicationControlTestContext`` (register brokers with directories, unfence them, create topics with manual
assignments, assign replicas to directories), plus helpers to read records back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from jbod_model.controller import ControllerConfig, ReferenceController, handle_request, write_records
from jbod_model.controller.messages import (
    AlterPartitionBrokerState,
    AlterPartitionPartitionData,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
    ApiRequest,
    ApiResponse,
    AssignReplicasToDirsDirectory,
    AssignReplicasToDirsPartition,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignReplicasToDirsTopic,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from jbod_model.controller.result import ControllerResult
from jbod_model.image import MetadataImage, PartitionRegistration
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    Record,
)
from jbod_model.uuid import Uuid

MV_3_5 = 11  # 3.5-IV2: leader epoch still bumped on ISR shrink
MV_3_6 = 14  # 3.6-IV2
MV_3_7_IV1 = 16
MV_3_7_IV2 = 17  # directory assignment
MV_3_9 = 21
MV_4_0 = 22  # ELR on the 3.9 branch

CLUSTER_ID = "jbod-test-cluster-0001"


def dir_id(broker: int, n: str = "A") -> Uuid:
    """Kafka's test-harness style directory id: ``TESTBROKER00001DIRAAAA`` (broker 1, dir A)."""
    return Uuid.from_string(f"TESTBROKER{broker:05d}DIR{n}AAA")


def incarnation(broker: int, generation: int = 1) -> Uuid:
    return Uuid.from_string(f"INCARNATION{broker:04d}GEN{generation:03d}A")


@dataclass
class Cluster:
    """Drives a :class:`ReferenceController` through requests, like ``ReplicationControlTestContext``."""

    controller: ReferenceController
    mv: int

    @classmethod
    def at(cls, mv: int = MV_3_9, config: ControllerConfig | None = None) -> Cluster:
        controller = ReferenceController(config=config or ControllerConfig(cluster_id=CLUSTER_ID))
        write_records(controller, [FeatureLevelRecord(name=FEATURE_NAME, feature_level=mv)])
        return cls(controller, mv)

    # -- views ---------------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def epoch(self, broker: int) -> int:
        return self.image.cluster.brokers[broker].epoch

    def partition(self, topic_id: Uuid, partition_id: int) -> PartitionRegistration:
        part = self.image.topics.get_partition(topic_id, partition_id)
        assert part is not None
        return part

    def propose(self, request: ApiRequest) -> ControllerResult[ApiResponse]:
        """Run the pure handler only (nothing is written or replayed)."""
        return handle_request(self.controller.context(), request)

    def commit(self, records: Iterable[Record]) -> list[LogEntry]:
        return write_records(self.controller, list(records))

    def set_mv(self, mv: int) -> None:
        self.commit([FeatureLevelRecord(name=FEATURE_NAME, feature_level=mv)])
        self.mv = mv

    def set_topic_config(self, topic: str, key: str, value: str) -> None:
        self.commit([ConfigRecord(resource_type=2, resource_name=topic, name=key, value=value)])

    # -- requests ------------------------------------------------------------------------------------------

    def registration_request(self, broker: int, dirs: Sequence[Uuid] = (), *, generation: int = 1,
                             cluster_id: str = CLUSTER_ID, max_mv: int | None = None,
                             rack: str | None = None) -> BrokerRegistrationRequest:
        features = (BrokerRegistrationFeature(name=FEATURE_NAME, min_supported_version=1,
                                              max_supported_version=max_mv if max_mv is not None else 25),)
        return BrokerRegistrationRequest(
            broker_id=broker, cluster_id=cluster_id, incarnation_id=incarnation(broker, generation),
            listeners=(BrokerRegistrationListener(name="PLAINTEXT", host=f"broker-{broker}", port=9092,
                                                  security_protocol=0),),
            features=features, rack=rack, log_dirs=tuple(dirs))

    def register(self, broker: int, dirs: Sequence[Uuid] = (), **kwargs: object) -> BrokerRegistrationResponse:
        _, response = self.controller.handle(self.registration_request(broker, dirs, **kwargs))
        assert isinstance(response, BrokerRegistrationResponse)
        return response

    def register_with_dirs(self, brokers: Mapping[int, Sequence[Uuid]]) -> None:
        for broker, dirs in brokers.items():
            response = self.register(broker, dirs)
            assert response.error_code == 0, response

    def heartbeat_request(self, broker: int, *, offline: Sequence[Uuid] = (), want_fence: bool = False,
                          want_shut_down: bool = False, offset: int | None = None,
                          epoch: int | None = None) -> BrokerHeartbeatRequest:
        return BrokerHeartbeatRequest(
            broker_id=broker, broker_epoch=self.epoch(broker) if epoch is None else epoch,
            current_metadata_offset=self.controller.next_offset if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down, offline_log_dirs=tuple(offline))

    def heartbeat(self, broker: int, **kwargs: object) -> tuple[list[LogEntry], BrokerHeartbeatResponse]:
        entries, response = self.controller.handle(self.heartbeat_request(broker, **kwargs))
        assert isinstance(response, BrokerHeartbeatResponse)
        return entries, response

    def unfence(self, *brokers: int) -> None:
        for broker in brokers:
            _, response = self.heartbeat(broker)
            assert not response.is_fenced, response

    def create_topic(self, name: str, assignments: Sequence[Sequence[int]],
                     configs: Mapping[str, str] | None = None) -> Uuid:
        from jbod_model.controller.messages import CreatableTopicConfig

        request = CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=tuple(CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(replicas))
                              for i, replicas in enumerate(assignments)),
            configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items())),))
        _, response = self.controller.handle(request)
        assert isinstance(response, CreateTopicsResponse)
        result = response.topics[0]
        assert result.error_code == 0, result
        return result.topic_id

    def assign_request(self, broker: int, assignments: Mapping[tuple[Uuid, int], Uuid] | Sequence[
            tuple[tuple[Uuid, int], Uuid]], *, epoch: int | None = None) -> AssignReplicasToDirsRequest:
        """One directory entry per (partition → dir) pair, in the given order."""
        pairs = list(assignments.items()) if isinstance(assignments, Mapping) else list(assignments)
        return AssignReplicasToDirsRequest(
            broker_id=broker, broker_epoch=self.epoch(broker) if epoch is None else epoch,
            directories=tuple(AssignReplicasToDirsDirectory(id=d, topics=(AssignReplicasToDirsTopic(
                topic_id=tp[0], partitions=(AssignReplicasToDirsPartition(partition_index=tp[1]),)),))
                for tp, d in pairs))

    def assign(self, broker: int, assignments: Mapping[tuple[Uuid, int], Uuid]
               ) -> tuple[list[LogEntry], AssignReplicasToDirsResponse]:
        entries, response = self.controller.handle(self.assign_request(broker, assignments))
        assert isinstance(response, AssignReplicasToDirsResponse)
        return entries, response

    def reassign(self, topic: str, partition: int, replicas: Sequence[int] | None
                 ) -> tuple[list[LogEntry], AlterPartitionReassignmentsResponse]:
        request = AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=topic, partitions=(
            ReassignablePartition(partition_index=partition,
                                  replicas=None if replicas is None else tuple(replicas)),)),))
        entries, response = self.controller.handle(request)
        assert isinstance(response, AlterPartitionReassignmentsResponse)
        return entries, response

    def alter_partition_request(self, leader: int, topic_id: Uuid, partition_id: int, new_isr: Sequence[int], *,
                                version: int = 3, leader_epoch: int | None = None,
                                partition_epoch: int | None = None, topic_name: str = "",
                                isr_epochs: Mapping[int, int] | None = None,
                                leader_recovery_state: int = 0) -> AlterPartitionRequest:
        part = self.partition(topic_id, partition_id)
        states = tuple(AlterPartitionBrokerState(broker_id=b, broker_epoch=(isr_epochs or {}).get(b, self.epoch(b)))
                       for b in new_isr) if version >= 3 else ()
        data = AlterPartitionPartitionData(
            partition_index=partition_id,
            leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr=tuple(new_isr) if version < 3 else (), new_isr_with_epochs=states,
            leader_recovery_state=leader_recovery_state,
            partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch)
        topic = AlterPartitionTopicData(topic_id=topic_id if version >= 2 else Uuid(0, 0),
                                        topic_name=topic_name if version < 2 else "", partitions=(data,))
        return AlterPartitionRequest(version=version, broker_id=leader, broker_epoch=self.epoch(leader),
                                     topics=(topic,))

    def alter_partition(self, *args: object, **kwargs: object) -> tuple[list[LogEntry], AlterPartitionResponse]:
        entries, response = self.controller.handle(self.alter_partition_request(*args, **kwargs))
        assert isinstance(response, AlterPartitionResponse)
        return entries, response


def records_of(entries: Iterable[LogEntry] | ControllerResult[ApiResponse]) -> list[Record]:
    if isinstance(entries, ControllerResult):
        return list(entries.records)
    return [e.record for e in entries]


def pcrs(records: Iterable[Record]) -> list[PartitionChangeRecord]:
    return [r for r in records if isinstance(r, PartitionChangeRecord)]


def brcrs(records: Iterable[Record]) -> list[BrokerRegistrationChangeRecord]:
    return [r for r in records if isinstance(r, BrokerRegistrationChangeRecord)]


def pcr(topic_id: Uuid, partition_id: int, version: int = 1, **fields: object) -> PartitionChangeRecord:
    """A PartitionChangeRecord with only the given fields set (Kafka's test style)."""
    return PartitionChangeRecord(version=version, topic_id=topic_id, partition_id=partition_id, **fields)


def sort_pcrs(records: Iterable[PartitionChangeRecord]) -> list[PartitionChangeRecord]:
    """``sortPartitionChangeRecords`` from ReplicationControlManagerTest: by "<topicId>-<partitionId>"."""
    return sorted(records, key=lambda r: f"{r.topic_id}-{r.partition_id}")
