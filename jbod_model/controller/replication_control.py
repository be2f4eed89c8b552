"""Partition-level controller operations: the port of ``ReplicationControlManager`` (3.9) for the RPCs
modelled.

Mirrors ``org.apache.kafka.controller.ReplicationControlManager``: ``createTopics``, ``createPartitions``,
``alterPartition``, ``alterPartitionReassignments``, ``handleAssignReplicasToDirs``, ``unregisterBroker`` and
the shared record generators (``generateLeaderAndIsrUpdates``, ``handleBrokerFenced``/``Unfenced``/
``InControlledShutdown``/``Unregistered``, ``handleDirectoriesOffline``). Every function is pure: it reads a
:class:`ControllerContext` and returns records (and a response); the image changes only on replay.

Where Java iterates a hash set of partitions the records come out sorted by
``"<topicIdBase64>-<partitionId>"`` (semantics §7.4).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jbod_model.controller.context import ControllerContext, TopicIdPartition, sorted_partitions
from jbod_model.controller.messages import (
    AlterPartitionPartitionResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
    AssignReplicasToDirsDirectoryResult,
    AssignReplicasToDirsPartitionResult,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    AssignReplicasToDirsTopicResult,
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from jbod_model.controller.partition_change import (
    Election,
    LeaderAcceptor,
    PartitionChangeBuilder,
    PartitionReassignmentReplicas,
    PartitionReassignmentRevert,
    is_reassignment_in_progress,
)
from jbod_model.controller.placement import InvalidReplicationFactor, place_replicas
from jbod_model.controller.result import NONE_ERROR, ApiError, ControllerResult
from jbod_model.errors import JbodError, RequestRejected
from jbod_model.errors_codes import Errors
from jbod_model.image import ConfigResourceType, PartitionRegistration, TopicImage
from jbod_model.records.metadata import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    ConfigRecord,
    FenceBrokerRecord,
    LeaderRecoveryState,
    PartitionChangeRecord,
    Record,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from jbod_model.uuid import ZERO_UUID, Uuid

CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
MAX_TOPIC_NAME_LENGTH = 249
#: ``ConfigSource.DYNAMIC_TOPIC_CONFIG`` as CreateTopicsResponse encodes it.
DYNAMIC_TOPIC_CONFIG_SOURCE = 1


def _builder(ctx: ControllerContext, tp: TopicIdPartition, topic_name: str, partition: PartitionRegistration,
             acceptor: LeaderAcceptor | None = None) -> PartitionChangeBuilder:
    """A PartitionChangeBuilder configured as every ReplicationControlManager call site does (minus ELR, which
    the caller sets: AssignReplicasToDirs deliberately does not, quirk §6.6)."""
    return PartitionChangeBuilder(
        partition, tp.topic_id, tp.partition_id,
        acceptor if acceptor is not None else LeaderAcceptor(ctx.image.cluster, partition),
        ctx.metadata_version, ctx.topic_effective_min_isr(topic_name),
    ).set_zk_migration_enabled(False).set_default_dir_provider(ctx)


# ------------------------------------------------------------------------------------------------------------
# Leader and ISR updates


def generate_leader_and_isr_updates(ctx: ControllerContext, broker_to_remove: int, broker_to_add: int,
                                    broker_with_unclean_shutdown: int,
                                    partitions: Iterable[TopicIdPartition]) -> list[PartitionChangeRecord]:
    """Mirrors ``generateLeaderAndIsrUpdates`` (R9.1): for each partition, drop ``broker_to_remove`` and
    ``broker_with_unclean_shutdown`` from the ISR and re-elect if needed. ``broker_to_add`` counts as an
    acceptable leader even though the image still shows it fenced (used while unfencing). The leader must
    still have its directory online (LeaderAcceptor, R2.4). Elections are UNCLEAN where the topic allows
    it."""

    def acceptable(r: int) -> bool:
        return (r not in (broker_to_remove, broker_with_unclean_shutdown)
                and (r == broker_to_add or ctx.is_active(r)))

    records: list[PartitionChangeRecord] = []
    for tp in partitions:
        topic = ctx.topic(tp.topic_id)
        if topic is None:
            raise JbodError(f"Topic ID {tp.topic_id} existed in isrMembers, but not in the topics map.")
        partition = topic.partitions.get(tp.partition_id)
        if partition is None:
            raise JbodError(f"Partition {tp} existed in isrMembers, but not in the partitions map.")
        builder = _builder(ctx, tp, topic.name, partition,
                           LeaderAcceptor(ctx.image.cluster, partition, acceptable))
        builder.set_eligible_leader_replicas_enabled(ctx.is_elr_enabled())
        if ctx.unclean_leader_election_enabled_for_topic(topic.name):
            builder.set_election(Election.UNCLEAN)
        if broker_with_unclean_shutdown != NO_LEADER:
            builder.set_unclean_shutdown_replicas([broker_with_unclean_shutdown])
        # With NO_LEADER for both this leaves the ISR as it is.
        builder.set_target_isr([r for r in partition.isr
                                if r not in (broker_to_remove, broker_with_unclean_shutdown)])
        record = builder.build()
        if record is not None:
            records.append(record)
    return records


def handle_broker_fenced(ctx: ControllerContext, broker_id: int) -> list[Record]:
    """Mirrors ``handleBrokerFenced``: leave every ISR and leadership, then a fencing BRCR v0
    (FenceBrokerRecord before 3.3-IV2)."""
    reg = ctx.registration(broker_id)
    if reg is None:
        raise JbodError(f"Can't find broker registration for broker {broker_id}")
    records: list[Record] = list(generate_leader_and_isr_updates(
        ctx, broker_id, NO_LEADER, NO_LEADER, ctx.partitions_with_broker_in_isr(broker_id)))
    if ctx.metadata_version.is_broker_registration_change_record_supported():
        records.append(BrokerRegistrationChangeRecord(version=0, broker_id=broker_id, broker_epoch=reg.epoch,
                                                      fenced=BrokerRegistrationFencingChange.FENCE))
    else:
        records.append(FenceBrokerRecord(id=broker_id, epoch=reg.epoch))
    return records


def handle_broker_unfenced(ctx: ControllerContext, broker_id: int, broker_epoch: int) -> list[Record]:
    """Mirrors ``handleBrokerUnfenced`` (R9.6): an unfencing BRCR v0 (UnfenceBrokerRecord before 3.3-IV2),
    then leaderless partitions may elect this broker — only where its directory is online."""
    records: list[Record] = []
    if ctx.metadata_version.is_broker_registration_change_record_supported():
        records.append(BrokerRegistrationChangeRecord(version=0, broker_id=broker_id, broker_epoch=broker_epoch,
                                                      fenced=BrokerRegistrationFencingChange.UNFENCE))
    else:
        records.append(UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch))
    records.extend(generate_leader_and_isr_updates(ctx, NO_LEADER, broker_id, NO_LEADER,
                                                   ctx.partitions_with_no_leader()))
    return records


def handle_broker_in_controlled_shutdown(ctx: ControllerContext, broker_id: int,
                                         broker_epoch: int) -> list[Record]:
    """Mirrors ``handleBrokerInControlledShutdown``: a BRCR v1 marking controlled shutdown (once, from
    3.3-IV3), then leave every ISR and move leadership away."""
    records: list[Record] = []
    if (ctx.metadata_version.is_in_controlled_shutdown_state_supported()
            and not ctx.in_controlled_shutdown(broker_id)):
        records.append(BrokerRegistrationChangeRecord(
            version=1, broker_id=broker_id, broker_epoch=broker_epoch,
            in_controlled_shutdown=BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN))
    records.extend(generate_leader_and_isr_updates(ctx, broker_id, NO_LEADER, NO_LEADER,
                                                   ctx.partitions_with_broker_in_isr(broker_id)))
    return records


def handle_broker_unclean_shutdown(ctx: ControllerContext, broker_id: int) -> list[Record]:
    """Mirrors ``handleBrokerUncleanShutdown`` (called by ``QuorumController.handleUncleanBrokerShutdown`` when a
    new incarnation registers): only at metadata.version ≥ 4.0-IV0 (ELR) — drop the broker from every ISR and ELR
    it is in, so it cannot be elected from stale state."""
    if not ctx.metadata_version.is_elr_supported():
        return []
    records: list[Record] = []
    records.extend(generate_leader_and_isr_updates(ctx, NO_LEADER, NO_LEADER, broker_id,
                                                   ctx.partitions_with_broker_in_isr(broker_id)))
    records.extend(generate_leader_and_isr_updates(ctx, NO_LEADER, NO_LEADER, broker_id,
                                                   ctx.partitions_with_broker_in_elr(broker_id)))
    return records


def handle_directories_offline(ctx: ControllerContext, broker_id: int, broker_epoch: int,
                               offline_dirs: Sequence[Uuid]) -> list[Record]:
    """Mirrors ``handleDirectoriesOffline`` (R5.3). Only directories currently online for this broker count
    (registration order, i.e. sorted); for each, every partition with a replica in it loses this broker from
    ISR and leadership; then ONE BRCR v2 carries the remaining online directories (sorted). When every
    directory is reported offline that list is empty, which replays as "no change" (R5.5, quirk §6.3)."""
    reg = ctx.registration(broker_id)
    if reg is None:
        raise JbodError(f"Can't find broker registration for broker {broker_id}")
    offline = set(offline_dirs)
    new_offline = [d for d in reg.directories if d in offline]
    if not new_offline:
        return []
    records: list[Record] = []
    for directory in new_offline:
        records.extend(generate_leader_and_isr_updates(ctx, broker_id, NO_LEADER, NO_LEADER,
                                                       ctx.partitions_in_directory(directory)))
    remaining = tuple(d for d in reg.directories if d not in offline)
    records.append(BrokerRegistrationChangeRecord(version=2, broker_id=broker_id, broker_epoch=broker_epoch,
                                                  log_dirs=remaining))
    return records


# ------------------------------------------------------------------------------------------------------------
# AssignReplicasToDirs


def assign_replicas_to_dirs(ctx: ControllerContext, request: AssignReplicasToDirsRequest
                            ) -> ControllerResult[AssignReplicasToDirsResponse]:
    """Mirrors ``handleAssignReplicasToDirs`` (3.9, R6).

    Request level: MV < 3.7-IV2 → UNSUPPORTED_VERSION, unknown broker or epoch mismatch → STALE_BROKER_EPOCH,
    both with no directories in the response. Per partition, first match wins: unknown topic id →
    UNKNOWN_TOPIC_ID; unknown partition → UNKNOWN_TOPIC_OR_PARTITION; broker not a replica →
    NOT_LEADER_OR_FOLLOWER; else NONE and a directory PCR if it changes anything. A directory is never
    rejected: one that is not among the broker's online directories (unknown, another broker's, LOST) counts
    as offline and the partitions assigned to it then lose this broker from ISR/leadership in extra PCRs after
    all directory PCRs (R6.5). Not atomic.
    """
    version = request.version
    if not ctx.metadata_version.is_directory_assignment_supported():
        return _rejected_assignment(version, RequestRejected(Errors.UNSUPPORTED_VERSION,
                                                             "Directory assignment is not supported yet."))
    broker_id = request.broker_id
    try:
        ctx.check_broker_epoch(broker_id, request.broker_epoch)
    except RequestRejected as rejected:
        return _rejected_assignment(version, rejected)
    registration = ctx.registration(broker_id)
    if registration is None:  # unreachable: the epoch check fails first (R6.1)
        return _rejected_assignment(version, RequestRejected(
            Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"))

    records: list[PartitionChangeRecord] = []
    leader_and_isr_updates: set[TopicIdPartition] = set()
    dir_results: list[AssignReplicasToDirsDirectoryResult] = []
    for req_dir in request.directories:
        dir_id = req_dir.id
        directory_is_offline = not registration.has_online_dir(dir_id)
        topic_results: list[AssignReplicasToDirsTopicResult] = []
        for req_topic in req_dir.topics:
            topic = ctx.topic(req_topic.topic_id)
            topic_error = Errors.NONE if topic is not None else Errors.UNKNOWN_TOPIC_ID
            partition_results: list[AssignReplicasToDirsPartitionResult] = []
            for req_partition in req_topic.partitions:
                index = req_partition.partition_index
                error = topic_error
                if topic is not None:
                    partition = topic.partitions.get(index)
                    if partition is None:
                        error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                    elif broker_id not in partition.replicas:
                        error = Errors.NOT_LEADER_OR_FOLLOWER
                    else:
                        tp = TopicIdPartition(topic.id, index)
                        # Quirk §6.6: this builder is not given setEligibleLeaderReplicasEnabled, so at ELR
                        # metadata versions a non-empty ELR is cleared by the directory record.
                        record = _builder(ctx, tp, topic.name, partition).set_directory(broker_id, dir_id).build()
                        if record is not None:
                            records.append(record)
                        if directory_is_offline:
                            leader_and_isr_updates.add(tp)
                partition_results.append(AssignReplicasToDirsPartitionResult(partition_index=index,
                                                                             error_code=error))
            topic_results.append(AssignReplicasToDirsTopicResult(topic_id=req_topic.topic_id,
                                                                 partitions=tuple(partition_results)))
        dir_results.append(AssignReplicasToDirsDirectoryResult(id=dir_id, topics=tuple(topic_results)))
    if leader_and_isr_updates:
        # Java iterates a HashSet here; §7.4 order. Built from the pre-request state, so no Directories field.
        records.extend(generate_leader_and_isr_updates(ctx, broker_id, NO_LEADER, NO_LEADER,
                                                       sorted_partitions(leader_and_isr_updates)))
    return ControllerResult(records=tuple(records), response=AssignReplicasToDirsResponse(
        version=version, error_code=Errors.NONE, directories=tuple(dir_results)))


def _rejected_assignment(version: int, rejected: RequestRejected) -> ControllerResult[AssignReplicasToDirsResponse]:
    # AssignReplicasToDirsRequest.getErrorResponse: only the top-level code.
    return ControllerResult(records=(), response=AssignReplicasToDirsResponse(version=version,
                                                                              error_code=rejected.error),
                            error=ApiError.from_rejection(rejected))


# ------------------------------------------------------------------------------------------------------------
# Manual assignments and new partitions


def validate_manual_partition_assignment(ctx: ControllerContext, replicas: Sequence[int],
                                         replication_factor: int | None) -> None:
    """Mirrors ``validateManualPartitionAssignment`` (R11.4): non-empty, registered brokers, no duplicate, and
    the same replication factor as the other partitions when one is given. Directories are not looked at."""
    if not replicas:
        raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                              "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker_id in sorted(replicas):
        if ctx.registration(broker_id) is None:
            raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes broker {broker_id}, but no such "
                                  "broker is registered.")
        if broker_id == previous:
            raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes the broker {previous} more than "
                                  "once.")
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                              f"The manual partition assignment includes a partition with {len(replicas)} "
                              "replica(s), but this is not consistent with previous partitions, which have "
                              f"{replication_factor} replica(s).")


def build_partition_registration(ctx: ControllerContext, replicas: Sequence[int],
                                 isr: Sequence[int]) -> PartitionRegistration:
    """Mirrors ``buildPartitionRegistration`` over a ``PartitionAssignment`` (R7.2, R7.3): directories by
    ``defaultDir``, leader = first ISR member, epochs 0, RECOVERED."""
    return PartitionRegistration(
        replicas=tuple(replicas), directories=tuple(ctx.default_dir(r) for r in replicas), isr=tuple(isr),
        leader=isr[0], leader_recovery_state=LeaderRecoveryState.RECOVERED, leader_epoch=0, partition_epoch=0)


def _topic_name_error(name: str) -> str | None:
    """``Topic.validate`` → the InvalidTopicException message, or None for a legal name."""
    reason: str | None = None
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None if reason is None else f"Topic name is invalid: {reason}"


def _has_collision_chars(name: str) -> bool:
    return "_" in name or "." in name


def _unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def create_topics(ctx: ControllerContext, request: CreateTopicsRequest) -> ControllerResult[CreateTopicsResponse]:
    """Mirrors ``ControllerApis.createTopics`` (duplicate names and ``__cluster_metadata`` refused up front)
    and ``ReplicationControlManager.createTopics`` / ``createTopic`` (R7).

    Names are validated (illegal, colliding on '.'/'_', TOPIC_ALREADY_EXISTS), null config values are refused
    (INVALID_CONFIG), then each topic is placed: a manual assignment is validated as Kafka does
    (INVALID_REQUEST unless numPartitions and replicationFactor are -1, INVALID_REPLICA_ASSIGNMENT for
    duplicates, unknown brokers, inconsistent sizes, all-inactive replicas or non-consecutive indexes),
    otherwise the deterministic striped placer runs (INVALID_REPLICATION_FACTOR / INVALID_PARTITIONS for bad
    values). Each new partition: directories by ``defaultDir`` (R7.1), ISR = active replicas, leader = first
    ISR. Atomic.
    """
    version = request.version
    seen: dict[str, int] = {}
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    duplicates = [name for name, n in seen.items() if n > 1]
    effective = [t for t in request.topics if seen[t.name] == 1 and t.name != CLUSTER_METADATA_TOPIC_NAME]

    topic_errors: dict[str, ApiError] = {}
    existing_collisions: dict[str, str] = {}
    for topic_image in ctx.image.topics.by_id.values():
        if _has_collision_chars(topic_image.name):
            existing_collisions.setdefault(_unify_collision_chars(topic_image.name), topic_image.name)
    for topic in effective:
        message = _topic_name_error(topic.name)
        if message is not None:
            topic_errors[topic.name] = ApiError(Errors.INVALID_TOPIC_EXCEPTION, message)
        if _has_collision_chars(topic.name):
            colliding = existing_collisions.get(_unify_collision_chars(topic.name))
            if colliding is not None:
                topic_errors[topic.name] = ApiError(Errors.INVALID_TOPIC_EXCEPTION,
                                                    f"Topic '{topic.name}' collides with existing topic: "
                                                    f"{colliding}")
    for topic in effective:
        if topic.name in ctx.image.topics.by_name:
            topic_errors[topic.name] = ApiError(Errors.TOPIC_ALREADY_EXISTS,
                                                f"Topic '{topic.name}' already exists.")
    config_changes: dict[str, dict[str, str]] = {}
    for topic in effective:
        if topic.name in topic_errors:
            continue
        null_configs = [c.name for c in topic.configs if c.value is None]
        if null_configs:
            topic_errors[topic.name] = ApiError(Errors.INVALID_CONFIG, "Null value not supported for topic "
                                                                       f"configs: {','.join(null_configs)}")
        else:
            config_changes[topic.name] = {c.name: c.value for c in topic.configs if c.value is not None}

    records: list[Record] = []
    successes: dict[str, CreatableTopicResult] = {}
    for topic in effective:
        if topic.name in topic_errors:
            continue
        try:
            error = _create_topic(ctx, topic, config_changes.get(topic.name, {}), records, successes, version)
        except RequestRejected as rejected:
            error = ApiError.from_rejection(rejected)
        if error.is_failure:
            topic_errors[topic.name] = error

    results: list[CreatableTopicResult] = []
    for topic in effective:
        failure = topic_errors.get(topic.name)
        if failure is not None:
            results.append(CreatableTopicResult(name=topic.name, error_code=failure.error,
                                                error_message=failure.message))
        else:
            results.append(successes[topic.name])
    for name in duplicates:
        results.append(CreatableTopicResult(name=name, error_code=Errors.INVALID_REQUEST,
                                            error_message="Duplicate topic name."))
    if seen.get(CLUSTER_METADATA_TOPIC_NAME) == 1:
        results.append(CreatableTopicResult(
            name=CLUSTER_METADATA_TOPIC_NAME, error_code=Errors.INVALID_REQUEST,
            error_message=f"Creation of internal topic {CLUSTER_METADATA_TOPIC_NAME} is prohibited."))
    response = CreateTopicsResponse(version=version, topics=tuple(results))
    if request.validate_only:
        return ControllerResult(records=(), response=response, atomic=True)
    return ControllerResult(records=tuple(records), response=response, atomic=True)


def _create_topic(ctx: ControllerContext, topic: CreatableTopic, configs: dict[str, str],
                  records: list[Record], successes: dict[str, CreatableTopicResult],
                  version: int) -> ApiError:
    """Mirrors ``ReplicationControlManager.createTopic``."""
    new_parts: dict[int, PartitionRegistration] = {}
    if topic.assignments:
        if topic.replication_factor != -1:
            return ApiError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but replication "
                                                   "factor was not set to -1.")
        if topic.num_partitions != -1:
            return ApiError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                   "numPartitions was not set to -1.")
        replication_factor: int | None = None
        for assignment in topic.assignments:
            if assignment.partition_index in new_parts:
                return ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments "
                                                                   f"for partition {assignment.partition_index}")
            validate_manual_partition_assignment(ctx, assignment.broker_ids, replication_factor)
            replication_factor = len(assignment.broker_ids)
            isr = [b for b in assignment.broker_ids if ctx.is_active(b)]
            if not isr:
                return ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                "All brokers specified in the manual partition assignment for partition "
                                f"{assignment.partition_index} are fenced or in controlled shutdown.")
            new_parts[assignment.partition_index] = build_partition_registration(ctx, assignment.broker_ids, isr)
        for i in range(len(new_parts)):
            if i not in new_parts:
                return ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                "partitions should be a consecutive 0-based integer sequence")
    elif topic.replication_factor < -1 or topic.replication_factor == 0:
        return ApiError(Errors.INVALID_REPLICATION_FACTOR,
                        "Replication factor must be larger than 0, or -1 to use the default value.")
    elif topic.num_partitions < -1 or topic.num_partitions == 0:
        return ApiError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    else:
        num_partitions = ctx.config.default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
        replication_factor = (ctx.config.default_replication_factor if topic.replication_factor == -1
                              else topic.replication_factor)
        try:
            placements = place_replicas(ctx.usable_brokers(), num_partitions, replication_factor)
        except InvalidReplicationFactor as e:
            return ApiError(Errors.INVALID_REPLICATION_FACTOR,
                            f"Unable to replicate the partition {replication_factor} time(s): {e.message}")
        for partition_id, replicas in enumerate(placements):
            isr = [b for b in replicas if ctx.is_active(b)]
            if not isr:
                # All brokers fenced or shutting down; consistent with the placer, INVALID_REPLICATION_FACTOR.
                return ApiError(Errors.INVALID_REPLICATION_FACTOR,
                                f"Unable to replicate the partition {replication_factor} time(s): All brokers "
                                "are currently fenced or in controlled shutdown.")
            new_parts[partition_id] = build_partition_registration(ctx, replicas, isr)

    topic_record_offset = ctx.next_write_offset + len(records)
    topic_id = ctx.topic_id_factory(topic.name, topic_record_offset)
    num_partitions = len(new_parts)
    first = new_parts[min(new_parts)]
    successes[topic.name] = CreatableTopicResult(
        name=topic.name, topic_id=topic_id, error_code=Errors.NONE, error_message=None,
        num_partitions=num_partitions, replication_factor=len(first.replicas),
        configs=tuple(CreatableTopicConfigs(name=k, value=configs[k], read_only=False,
                                            config_source=DYNAMIC_TOPIC_CONFIG_SOURCE, is_sensitive=False)
                      for k in sorted(configs)) if version >= 5 else ())
    records.append(TopicRecord(name=topic.name, topic_id=topic_id))
    # ConfigRecords go after the TopicRecord and before the PartitionRecords, as in Kafka.
    for key in sorted(configs):
        records.append(ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=topic.name, name=key,
                                    value=configs[key]))
    mv = ctx.metadata_version
    for partition_id in sorted(new_parts):
        records.append(new_parts[partition_id].to_record(topic_id, partition_id, mv))
    return NONE_ERROR


def create_partitions(ctx: ControllerContext, request: CreatePartitionsRequest
                      ) -> ControllerResult[CreatePartitionsResponse]:
    """Mirrors ``ControllerApis.createPartitions`` (duplicates refused) and ``ReplicationControlManager.
    createPartitions``: per topic UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (no increase),
    INVALID_REPLICA_ASSIGNMENT (wrong count, invalid manual assignment), INVALID_REPLICATION_FACTOR. New
    partitions get ``defaultDir`` directories (R7.2). Atomic; validateOnly drops the records."""
    version = request.version
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results: list[CreatePartitionsTopicResult] = [
        CreatePartitionsTopicResult(name=name, error_code=Errors.INVALID_REQUEST,
                                    error_message="Duplicate topic name.")
        for name, n in counts.items() if n > 1]
    records: list[Record] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        error = NONE_ERROR
        try:
            _create_partitions(ctx, topic, records)
        except RequestRejected as rejected:
            error = ApiError.from_rejection(rejected)
        results.append(CreatePartitionsTopicResult(name=topic.name, error_code=error.error,
                                                   error_message=error.message))
    response = CreatePartitionsResponse(version=version, results=tuple(results))
    return ControllerResult(records=() if request.validate_only else tuple(records), response=response,
                            atomic=True)


def _create_partitions(ctx: ControllerContext, topic: CreatePartitionsTopic, records: list[Record]) -> None:
    topic_image = ctx.topic_by_name(topic.name)
    if topic_image is None:
        raise RequestRejected(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    current = len(topic_image.partitions)
    if topic.count == current:
        raise RequestRejected(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise RequestRejected(Errors.INVALID_PARTITIONS, f"The topic {topic.name} currently has {current} "
                                                         f"partition(s); {topic.count} would not be an increase.")
    additional = topic.count - current
    if topic.assignments is not None and len(topic.assignments) != additional:
        raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                              f"Attempted to add {additional} additional partition(s), but only "
                              f"{len(topic.assignments)} assignment(s) were specified.")
    if not topic_image.partitions:
        raise RequestRejected(Errors.UNKNOWN_SERVER_ERROR, f"Invalid state: topic {topic.name} appears to have no "
                                                           "partitions.")
    replication_factor = len(topic_image.partitions[min(topic_image.partitions)].replicas)
    start = current
    assignments: list[tuple[int, ...]]
    if topic.assignments is not None:
        assignments = []
        for i, assignment in enumerate(topic.assignments):
            validate_manual_partition_assignment(ctx, assignment.broker_ids, replication_factor)
            if not any(ctx.is_active(b) for b in assignment.broker_ids):
                raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                                      "All brokers specified in the manual partition assignment for partition "
                                      f"{start + i} are fenced or in controlled shutdown.")
            assignments.append(assignment.broker_ids)
    else:
        # The placer's InvalidReplicationFactorException reaches the client unwrapped here (unlike
        # CreateTopics).
        assignments = [tuple(p) for p in place_replicas(ctx.usable_brokers(), additional, replication_factor)]
    mv = ctx.metadata_version
    for i, replicas in enumerate(assignments):
        isr = [b for b in replicas if ctx.is_active(b)]
        if not isr:
            # Kafka appends partition records as it goes, so earlier partitions of this topic stay in the
            # batch.
            raise RequestRejected(Errors.INVALID_REPLICATION_FACTOR,
                                  f"Unable to replicate the partition {replication_factor} time(s): All brokers "
                                  "are currently fenced or in controlled shutdown.")
        records.append(build_partition_registration(ctx, replicas, isr).to_record(topic_image.id, start + i, mv))


# ------------------------------------------------------------------------------------------------------------
# AlterPartitionReassignments


def alter_partition_reassignments(ctx: ControllerContext, request: AlterPartitionReassignmentsRequest
                                  ) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    """Mirrors ``alterPartitionReassignments`` (R11): per partition, start/change (replicas given) or cancel
    (replicas null, NO_REASSIGNMENT_IN_PROGRESS when none). Every partition is computed from the pre-request
    state. Atomic."""
    records: list[Record] = []
    topic_responses: list[ReassignableTopicResponse] = []
    for topic in request.topics:
        partition_responses: list[ReassignablePartitionResponse] = []
        for target in topic.partitions:
            error = NONE_ERROR
            try:
                record = _alter_partition_reassignment(ctx, topic.name, target)
                if record is not None:
                    records.append(record)
            except RequestRejected as rejected:
                error = ApiError.from_rejection(rejected)
            except JbodError:
                # Java catches Throwable here; anything unexpected is an UNKNOWN_SERVER_ERROR for this
                # partition.
                error = ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
            partition_responses.append(ReassignablePartitionResponse(
                partition_index=target.partition_index, error_code=error.error, error_message=error.message))
        topic_responses.append(ReassignableTopicResponse(name=topic.name, partitions=tuple(partition_responses)))
    return ControllerResult(records=tuple(records), atomic=True, response=AlterPartitionReassignmentsResponse(
        version=request.version, error_code=Errors.NONE, error_message=None, responses=tuple(topic_responses)))


def _alter_partition_reassignment(ctx: ControllerContext, topic_name: str,
                                  target: ReassignablePartition) -> PartitionChangeRecord | None:
    topic = ctx.topic_by_name(topic_name)
    if topic is None:
        raise RequestRejected(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic_name}.")
    partition = topic.partitions.get(target.partition_index)
    if partition is None:
        raise RequestRejected(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                              f"Unable to find partition {topic_name}:{target.partition_index}.")
    tp = TopicIdPartition(topic.id, target.partition_index)
    if target.replicas is None:
        return cancel_partition_reassignment(ctx, topic, tp, partition)
    return change_partition_reassignment(ctx, topic, tp, partition, target.replicas)


def cancel_partition_reassignment(ctx: ControllerContext, topic: TopicImage, tp: TopicIdPartition,
                                  partition: PartitionRegistration) -> PartitionChangeRecord | None:
    """Mirrors ``cancelPartitionReassignment`` (R11.3): revert to current − adding (current order); an unclean
    revert needs unclean leader election for the topic."""
    if not is_reassignment_in_progress(partition):
        raise RequestRejected(Errors.NO_REASSIGNMENT_IN_PROGRESS, Errors.NO_REASSIGNMENT_IN_PROGRESS.default_message)
    revert = PartitionReassignmentRevert.of(partition)
    unclean_allowed = ctx.unclean_leader_election_enabled_for_topic(topic.name)
    if revert.unclean and not unclean_allowed:
        raise RequestRejected(Errors.INVALID_REPLICA_ASSIGNMENT,
                              f"Unable to revert partition assignment for {topic.name}:{tp.partition_id} because "
                              "it would require an unclean leader election.")
    builder = _builder(ctx, tp, topic.name, partition).set_eligible_leader_replicas_enabled(ctx.is_elr_enabled())
    if unclean_allowed:
        builder.set_election(Election.UNCLEAN)
    return (builder.set_target_isr(revert.isr).set_target_replicas(revert.replicas)
            .set_target_removing(()).set_target_adding(()).build())


def change_partition_reassignment(ctx: ControllerContext, topic: TopicImage, tp: TopicIdPartition,
                                  partition: PartitionRegistration,
                                  target_replicas: Sequence[int]) -> PartitionChangeRecord | None:
    """Mirrors ``changePartitionReassignment`` (R11.1): replicas = target + removing, adding/removing set; the
    builder completes the reassignment at once when the ISR already covers the target; directories follow R8
    (survivors keep theirs, new replicas get ``defaultDir``)."""
    validate_manual_partition_assignment(ctx, target_replicas, None)
    reassignment = PartitionReassignmentReplicas.of_target(partition.replicas, target_replicas)
    builder = _builder(ctx, tp, topic.name, partition).set_eligible_leader_replicas_enabled(ctx.is_elr_enabled())
    if reassignment.replicas != partition.replicas:
        builder.set_target_replicas(reassignment.replicas)
    if reassignment.removing:
        builder.set_target_removing(reassignment.removing)
    if reassignment.adding:
        builder.set_target_adding(reassignment.adding)
    return builder.build()


# ------------------------------------------------------------------------------------------------------------
# AlterPartition


def alter_partition(ctx: ControllerContext, request: AlterPartitionRequest) -> ControllerResult[AlterPartitionResponse]:
    """Mirrors ``ReplicationControlManager.alterPartition``: the leader changes the ISR. Top-level
    STALE_BROKER_EPOCH for an unknown broker or epoch mismatch; per partition UNKNOWN_TOPIC_ID (v2+; by name
    before: UNKNOWN_TOPIC_OR_PARTITION), UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (request epochs ahead of
    ours), FENCED_LEADER_EPOCH, INVALID_REQUEST (not the leader, invalid ISR, recovery-state misuse),
    INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before v2). A change that completes a
    reassignment and moves leadership away answers NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before v2) while
    still writing the record (R11.2). ISR eligibility ignores directories (R2.5). Not atomic."""
    version = request.version
    if not request.topics:
        return ControllerResult(records=(), response=AlterPartitionResponse(version=version))
    try:
        ctx.check_broker_epoch(request.broker_id, request.broker_epoch)
    except RequestRejected as rejected:
        return ControllerResult(records=(), response=AlterPartitionResponse(version=version,
                                                                            error_code=rejected.error),
                                error=ApiError.from_rejection(rejected))
    try:
        records, topic_results = _alter_partition(ctx, request)
    except RequestRejected as rejected:
        # An exception inside the event (e.g. an unknown LeaderRecoveryState) fails the whole request.
        return ControllerResult(records=(), response=AlterPartitionResponse(version=version,
                                                                            error_code=rejected.error),
                                error=ApiError.from_rejection(rejected))
    return ControllerResult(records=tuple(records), response=AlterPartitionResponse(
        version=version, error_code=Errors.NONE, topics=tuple(topic_results)))


def _alter_partition(ctx: ControllerContext, request: AlterPartitionRequest
                     ) -> tuple[list[Record], list[AlterPartitionTopicResult]]:
    version = request.version
    records: list[Record] = []
    topic_results: list[AlterPartitionTopicResult] = []
    for topic_data in request.topics:
        if version > 1:
            topic = ctx.topic(topic_data.topic_id) if topic_data.topic_id != ZERO_UUID else None
        else:
            topic = ctx.topic_by_name(topic_data.topic_name)
        partition_results: list[AlterPartitionPartitionResult] = []
        if topic is None:
            unknown = Errors.UNKNOWN_TOPIC_ID if version > 1 else Errors.UNKNOWN_TOPIC_OR_PARTITION
            for partition_data in topic_data.partitions:
                partition_results.append(AlterPartitionPartitionResult(
                    partition_index=partition_data.partition_index, error_code=unknown))
            topic_results.append(AlterPartitionTopicResult(topic_name=topic_data.topic_name,
                                                           topic_id=topic_data.topic_id,
                                                           partitions=tuple(partition_results)))
            continue
        for partition_data in topic_data.partitions:
            # Before v3 the ISR carries no broker epochs: each member counts with epoch -1 (unchecked).
            new_isr: list[tuple[int, int]] = (
                [(s.broker_id, s.broker_epoch) for s in partition_data.new_isr_with_epochs] if version >= 3
                else [(b, -1) for b in partition_data.new_isr])
            partition_id = partition_data.partition_index
            partition = topic.partitions.get(partition_id)
            validation = _validate_alter_partition_data(ctx, request.broker_id, partition, version,
                                                        partition_data.leader_epoch, partition_data.partition_epoch,
                                                        partition_data.leader_recovery_state, new_isr)
            if validation is not Errors.NONE or partition is None:
                partition_results.append(AlterPartitionPartitionResult(partition_index=partition_id,
                                                                       error_code=validation))
                continue
            tp = TopicIdPartition(topic.id, partition_id)
            builder = _builder(ctx, tp, topic.name, partition).set_eligible_leader_replicas_enabled(
                ctx.is_elr_enabled())
            if ctx.unclean_leader_election_enabled_for_topic(topic.name):
                builder.set_election(Election.UNCLEAN)
            record = (builder.set_target_isr([b for b, _ in new_isr])
                      .set_target_leader_recovery_state(partition_data.leader_recovery_state).build())
            if record is not None:
                records.append(record)
                partition = partition.merge(record)
                if record.leader not in (request.broker_id, NO_LEADER_CHANGE):
                    # Completing a reassignment moved leadership away from the requester: it must refetch
                    # metadata. The record is still written (an error *and* a record, unusually).
                    error = Errors.NEW_LEADER_ELECTED if version > 1 else Errors.FENCED_LEADER_EPOCH
                    partition_results.append(AlterPartitionPartitionResult(partition_index=partition_id,
                                                                           error_code=error))
                    continue
            partition_results.append(AlterPartitionPartitionResult(
                partition_index=partition_id, error_code=Errors.NONE, leader_id=partition.leader,
                isr=partition.isr, leader_recovery_state=partition.leader_recovery_state,
                leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch))
        topic_results.append(AlterPartitionTopicResult(topic_name=topic_data.topic_name,
                                                       topic_id=topic_data.topic_id,
                                                       partitions=tuple(partition_results)))
    return records, topic_results


def _validate_isr(replicas: Sequence[int], isr: Sequence[int]) -> bool:
    """``Replicas.validateIsr``: no negative id, no duplicate, every member a replica (empty is valid)."""
    if not isr:
        return True
    if not replicas:
        return False
    return min(isr) >= 0 and len(set(isr)) == len(isr) and set(isr) <= set(replicas)


def _validate_alter_partition_data(ctx: ControllerContext, broker_id: int, partition: PartitionRegistration | None,
                                   version: int, leader_epoch: int, partition_epoch: int,
                                   leader_recovery_state: int, new_isr: Sequence[tuple[int, int]]) -> Errors:
    """Mirrors ``validateAlterPartitionData``, check for check."""
    if partition is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    # Epochs ahead of ours: this controller is probably stale; NOT_CONTROLLER makes the leader look again.
    if leader_epoch > partition.leader_epoch or partition_epoch > partition.partition_epoch:
        return Errors.NOT_CONTROLLER
    if leader_epoch < partition.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if broker_id != partition.leader:
        return Errors.INVALID_REQUEST
    if partition_epoch < partition.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION
    isr = [b for b, _ in new_isr]
    if not _validate_isr(partition.replicas, isr):
        return Errors.INVALID_REQUEST
    if partition.leader not in isr:
        return Errors.INVALID_REQUEST  # the ISR must always include the current leader
    if leader_recovery_state not in (LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING):
        # LeaderRecoveryState.of throws IllegalArgumentException: the whole event fails in Kafka.
        raise RequestRejected(Errors.UNKNOWN_SERVER_ERROR, f"Value {leader_recovery_state} is not a valid "
                                                           "leader recovery state")
    if leader_recovery_state == LeaderRecoveryState.RECOVERING and len(isr) > 1:
        return Errors.INVALID_REQUEST
    if (partition.leader_recovery_state == LeaderRecoveryState.RECOVERED
            and leader_recovery_state == LeaderRecoveryState.RECOVERING):
        return Errors.INVALID_REQUEST
    for member, epoch in new_isr:
        # ineligibleReplicasForIsr (R2.5): registration, controlled shutdown, fencing, epoch — never
        # directories.
        reg = ctx.registration(member)
        if reg is None or reg.in_controlled_shutdown or reg.fenced or epoch not in (-1, reg.epoch):
            return Errors.INELIGIBLE_REPLICA if version > 1 else Errors.OPERATION_NOT_ATTEMPTED
    return Errors.NONE


# ------------------------------------------------------------------------------------------------------------
# UnregisterBroker


def unregister_broker(ctx: ControllerContext, request: UnregisterBrokerRequest
                      ) -> ControllerResult[UnregisterBrokerResponse]:
    """Mirrors ``ReplicationControlManager.unregisterBroker`` → ``handleBrokerUnregistered``: leave every ISR
    (and ELR) with leadership moved away, then an UnregisterBrokerRecord with the current epoch. Unknown
    broker → BROKER_ID_NOT_REGISTERED (ControllerApis sends no message)."""
    broker_id = request.broker_id
    reg = ctx.registration(broker_id)
    if reg is None:
        rejected = RequestRejected(Errors.BROKER_ID_NOT_REGISTERED,
                                   f"Broker ID {broker_id} is not currently registered")
        return ControllerResult(records=(), error=ApiError.from_rejection(rejected),
                                response=UnregisterBrokerResponse(version=request.version,
                                                                  error_code=Errors.BROKER_ID_NOT_REGISTERED))
    records: list[Record] = []
    records.extend(generate_leader_and_isr_updates(ctx, broker_id, NO_LEADER, NO_LEADER,
                                                   ctx.partitions_with_broker_in_isr(broker_id)))
    records.extend(generate_leader_and_isr_updates(ctx, broker_id, NO_LEADER, NO_LEADER,
                                                   ctx.partitions_with_broker_in_elr(broker_id)))
    records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=reg.epoch))
    return ControllerResult(records=tuple(records), response=UnregisterBrokerResponse(version=request.version))

