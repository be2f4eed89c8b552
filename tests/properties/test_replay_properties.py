"""Property tests of replay: batch-boundary invariance, round trips, invariants on valid streams, faults on mutants.

The strategy :func:`valid_streams` generates record streams the way Kafka's controller would write them (a
"controller-lite" reading the image replayed so far): a metadata.version first (11, 17, 21 or 22, possibly upgraded
from 11 later), brokers registering (RegisterBrokerRecord v3 with directories at ≥ 3.7-IV2, v2 without below),
unfencing and fencing (BrokerRegistrationChangeRecord v0 plus the leader/ISR moves of ``handleBrokerFenced``),
topics whose replicas get ``ClusterControlManager.defaultDir``, AlterPartition-like ISR changes, elections,
reassignments (start and completion, directories per ``PartitionChangeBuilder``), AssignReplicasToDirs (also into an
offline directory, with the demotion of ``handleAssignReplicasToDirs``), directory failures
(``handleDirectoriesOffline``: leader/ISR moves, then BrokerRegistrationChangeRecord v2), topic deletion,
unregistration, configs and committed transactions. Each generated batch is what one controller operation writes.

Property (a) mirrors Kafka's ``RecordTestUtils.TestThroughAllIntermediateImagesLeadingToFinalImageHelper``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_model.directory_id import MIGRATING, UNASSIGNED
from jbod_model.errors import ReplayFault
from jbod_model.image import EMPTY_IMAGE, BrokerRegistration, MetadataImage, PartitionRegistration, TopicsImage
from jbod_model.image_json import image_json_pieces, image_json_text, image_json_text_of, image_to_json
from jbod_model.invariants import InvariantTracker, check_image, check_step
from jbod_model.metadata_version import FEATURE_NAME, MetadataVersion
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_from_json, record_to_json
from jbod_model.records.metadata import (
    NO_LEADER,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from jbod_model.replay import MetadataDelta, Replayer, configurations_of, replay_entries, replay_records
from jbod_model.replicas import replica_view
from jbod_model.uuid import Uuid

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Most significant halves for generated ids: both signs, so Kafka's *signed* Uuid order matters (a string starting
# with g..z, 0..9, '-' or '_' sorts before A..f). The least significant half is a counter: ids never collide.
_MSBS = (-(1 << 63), -(1 << 40), -1, 1, 7, 1 << 40, (1 << 63) - 1)
_BROKER_IDS = range(1, 6)
_TOPIC_CONFIG = 2  # ConfigResource.Type.TOPIC


@dataclass(frozen=True)
class Stream:
    """A generated valid stream: the batches one controller operation each wrote."""

    batches: tuple[tuple[Record, ...], ...]

    @property
    def records(self) -> list[Record]:
        return [r for batch in self.batches for r in batch]

    def entries(self) -> list[LogEntry]:
        return [LogEntry(offset=i, record=r) for i, r in enumerate(self.records)]


class _Controller:
    """Writes the records Kafka's controller would write, reading the image replayed so far."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], level: int) -> None:
        self.draw = draw
        self.mv = MetadataVersion(level)
        self.image = EMPTY_IMAGE
        self.batches: list[tuple[Record, ...]] = []
        self._offset = 0
        self._lsb = 1000
        self._epoch = 100
        self._topics = 0
        self.ever_dirs: dict[int, list[Uuid]] = {}
        self.emit([FeatureLevelRecord(name=FEATURE_NAME, feature_level=level)])

    # -- plumbing ----------------------------------------------------------------------------------------------

    def uuid(self) -> Uuid:
        self._lsb += 1
        return Uuid(self.draw(st.sampled_from(_MSBS)), self._lsb)

    def next_epoch(self) -> int:
        # The controller gives a new incarnation its next write offset: always higher than any earlier epoch.
        self._epoch += 10
        return self._epoch

    def emit(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self.batches.append(tuple(records))
        self.image = replay_records(records, self.image, first_offset=self._offset)
        self._offset += len(records)

    @property
    def brokers(self) -> dict[int, BrokerRegistration]:
        return dict(self.image.cluster.brokers)

    @property
    def dirs_supported(self) -> bool:
        return self.mv.is_directory_assignment_supported()

    def partitions(self) -> list[tuple[Uuid, int, PartitionRegistration]]:
        return sorted(((t.id, pid, p) for t, pid, p in self.image.topics.partitions()),
                      key=lambda x: (str(x[0]), x[1]))

    def active(self, broker_id: int) -> bool:
        reg = self.image.cluster.brokers.get(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def acceptable(self, part: PartitionRegistration, broker_id: int, *, extra_active: int | None = None) -> bool:
        """``LeaderAcceptor``: active (or being unfenced) and its directory online (R2.4)."""
        return ((broker_id == extra_active or self.active(broker_id))
                and self.image.cluster.has_online_dir(broker_id, part.directory(broker_id)))

    def default_dir(self, broker_id: int) -> Uuid:
        """``ClusterControlManager.defaultDir`` (R7.1)."""
        if not self.dirs_supported:
            return MIGRATING
        reg = self.image.cluster.brokers.get(broker_id)
        if reg is None:
            return UNASSIGNED
        if not reg.directories:
            return MIGRATING
        return reg.directories[0] if len(reg.directories) == 1 else UNASSIGNED

    def pcr(self, tid: Uuid, pid: int, **fields: Any) -> PartitionChangeRecord:
        return PartitionChangeRecord(version=self.mv.partition_change_record_version(), topic_id=tid,
                                     partition_id=pid, **fields)

    def change(self, tid: Uuid, pid: int, part: PartitionRegistration, *, isr: tuple[int, ...] | None = None,
               leader: int | None = None, replicas: tuple[int, ...] | None = None,
               adding: tuple[int, ...] | None = None, removing: tuple[int, ...] | None = None,
               directories: tuple[Uuid, ...] | None = None) -> PartitionChangeRecord | None:
        """A minimal PartitionChangeRecord, as ``PartitionChangeBuilder.build`` (None when nothing changes)."""
        fields: dict[str, Any] = {}
        if isr is not None and isr != part.isr:
            fields["isr"] = isr
        if leader is not None and leader != part.leader:
            fields["leader"] = leader
        if replicas is not None and replicas != part.replicas:
            fields["replicas"] = replicas
            if not set(replicas) >= set(part.replicas) and "leader" not in fields:
                fields["leader"] = part.leader  # R9.4: dropping a replica bumps the leader epoch
        if ("isr" in fields and "leader" not in fields and not set(fields["isr"]) >= set(part.isr)
                and self.mv.is_leader_epoch_bump_required_on_isr_shrink()):
            fields["leader"] = part.leader  # before 3.6-IV0 an ISR shrink bumps the leader epoch too
        if adding is not None and adding != part.adding_replicas:
            fields["adding_replicas"] = adding
        if removing is not None and removing != part.removing_replicas:
            fields["removing_replicas"] = removing
        if directories is not None and directories != part.directories:
            fields["directories"] = directories
        return self.pcr(tid, pid, **fields) if fields else None

    def elect(self, part: PartitionRegistration, isr: Sequence[int], *, exclude: int | None = None,
              extra_active: int | None = None) -> int:
        """``PartitionChangeBuilder.electLeader`` (ONLINE): keep an acceptable current leader, else the first
        acceptable ISR member in replica order, else none (R9.2)."""
        def ok(r: int) -> bool:
            return r != exclude and self.acceptable(part, r, extra_active=extra_active)
        if part.leader in isr and ok(part.leader):
            return part.leader
        return next((r for r in part.replicas if r in isr and ok(r)), NO_LEADER)

    def remove_broker(self, tid: Uuid, pid: int, part: PartitionRegistration,
                      broker_id: int) -> PartitionChangeRecord | None:
        """``generateLeaderAndIsrUpdates(brokerToRemove)``: out of ISR and leadership; without ELR the last ISR
        member stays with leader -1 (R9.1–R9.3)."""
        target = tuple(r for r in part.isr if r != broker_id)
        leader = self.elect(part, target, exclude=broker_id)
        return self.change(tid, pid, part, isr=target or part.isr, leader=leader)

    def rbr(self, broker_id: int, incarnation: Uuid, epoch: int, *, fenced: bool, shutdown: bool = False,
            dirs: tuple[Uuid, ...] = ()) -> RegisterBrokerRecord:
        version = self.mv.register_broker_record_version()
        return RegisterBrokerRecord(
            version=version, broker_id=broker_id, incarnation_id=incarnation, broker_epoch=epoch,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host=f"broker{broker_id}", port=9092),),
            fenced=fenced, in_controlled_shutdown=shutdown if version >= 1 else False,
            log_dirs=dirs if version >= 3 else ())

    def draw_dirs(self, broker_id: int) -> tuple[Uuid, ...]:
        """Directories for a registration: some of the broker's own earlier ones and/or new ones, in any order."""
        if not self.dirs_supported:
            return ()
        own = list(self.ever_dirs.get(broker_id, []))
        keep = self.draw(st.lists(st.sampled_from(own), unique=True, max_size=len(own))) if own else []
        new = [self.uuid() for _ in range(self.draw(st.integers(0 if keep else 1, 2)))]
        self.ever_dirs.setdefault(broker_id, []).extend(new)
        return tuple(self.draw(st.permutations(keep + new)))

    # -- operations: each returns the records of one batch, or None when it does not apply ------------------

    def register(self) -> list[Record] | None:
        free = [b for b in _BROKER_IDS if b not in self.brokers]
        if not free:
            return None
        b = self.draw(st.sampled_from(free))
        return [self.rbr(b, self.uuid(), self.next_epoch(), fenced=True, dirs=self.draw_dirs(b))]

    def reregister(self) -> list[Record] | None:
        # A new incarnation: only once the old session is gone (fenced), else DUPLICATE_BROKER_REGISTRATION.
        fenced = [b for b, reg in self.brokers.items() if reg.fenced]
        if not fenced:
            return None
        b = self.draw(st.sampled_from(sorted(fenced)))
        return [self.rbr(b, self.uuid(), self.next_epoch(), fenced=True, dirs=self.draw_dirs(b))]

    def amend(self) -> list[Record] | None:
        # BrokerRegistrationTracker (KAFKA-16757): after the upgrade to 3.7-IV2 a broker whose registration has no
        # directories re-sends it with the same incarnation, keeping epoch and fencing (KAFKA-16952).
        if not self.dirs_supported:
            return None
        bare = [b for b, reg in self.brokers.items() if not reg.directories]
        if not bare:
            return None
        reg = self.brokers[self.draw(st.sampled_from(sorted(bare)))]
        return [self.rbr(reg.id, reg.incarnation_id, reg.epoch, fenced=reg.fenced,
                         shutdown=reg.in_controlled_shutdown, dirs=self.draw_dirs(reg.id))]

    def unfence(self, broker_id: int | None = None) -> list[Record] | None:
        fenced = [b for b, reg in self.brokers.items() if reg.fenced]
        if not fenced:
            return None
        b = broker_id if broker_id is not None else self.draw(st.sampled_from(sorted(fenced)))
        records: list[Record] = [BrokerRegistrationChangeRecord(version=0, broker_id=b,
                                                                broker_epoch=self.brokers[b].epoch, fenced=-1)]
        # handleBrokerUnfenced: leaderless partitions may now elect (only where the directory is online, R9.6).
        for tid, pid, part in self.partitions():
            if part.leader == NO_LEADER:
                rec = self.change(tid, pid, part, leader=self.elect(part, part.isr, extra_active=b))
                if rec is not None:
                    records.append(rec)
        return records

    def fence(self) -> list[Record] | None:
        live = [b for b, reg in self.brokers.items() if not reg.fenced]
        if not live:
            return None
        b = self.draw(st.sampled_from(sorted(live)))
        records: list[Record] = [rec for tid, pid, part in self.partitions() if b in part.isr
                                 if (rec := self.remove_broker(tid, pid, part, b)) is not None]
        records.append(BrokerRegistrationChangeRecord(version=0, broker_id=b, broker_epoch=self.brokers[b].epoch,
                                                      fenced=1))
        return records

    def unregister(self) -> list[Record] | None:
        if not self.brokers:
            return None
        b = self.draw(st.sampled_from(sorted(self.brokers)))
        records: list[Record] = [rec for tid, pid, part in self.partitions() if b in part.isr
                                 if (rec := self.remove_broker(tid, pid, part, b)) is not None]
        records.append(UnregisterBrokerRecord(broker_id=b, broker_epoch=self.brokers[b].epoch))
        return records

    def create_topic(self) -> list[Record] | None:
        active = [b for b in sorted(self.brokers) if self.active(b)]
        if not active:
            return None
        self._topics += 1
        name, tid = f"topic-{self._topics}", self.uuid()
        records: list[Record] = [TopicRecord(name=name, topic_id=tid)]
        for pid in range(self.draw(st.integers(1, 3))):
            first = self.draw(st.sampled_from(active))
            others = [b for b in sorted(self.brokers) if b != first]
            rest = self.draw(st.lists(st.sampled_from(others), unique=True, max_size=2)) if others else []
            replicas = tuple(self.draw(st.permutations([first, *rest])))
            isr = tuple(r for r in replicas if self.active(r))  # R7.3
            version = self.mv.partition_record_version()
            dirs = tuple(self.default_dir(r) for r in replicas) if version >= 1 else ()
            records.append(PartitionRecord(version=version, topic_id=tid, partition_id=pid, replicas=replicas,
                                           isr=isr, leader=isr[0], leader_epoch=0, partition_epoch=0,
                                           directories=dirs))
        if self.draw(st.booleans()):
            records.append(ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=name, name="retention.ms",
                                        value=str(self.draw(st.integers(1, 10**6)))))
        if self.draw(st.booleans()):
            records = [BeginTransactionRecord(name="create"), *records, EndTransactionRecord()]
        return records

    def delete_topic(self) -> list[Record] | None:
        topics = sorted(self.image.topics.by_id, key=str)
        if not topics:
            return None
        return [RemoveTopicRecord(topic_id=self.draw(st.sampled_from(topics)))]

    def config(self) -> list[Record] | None:
        names = sorted(self.image.topics.by_name)
        if not names:
            return None
        value = self.draw(st.one_of(st.none(), st.sampled_from(["delete", "compact"])))
        return [ConfigRecord(resource_type=_TOPIC_CONFIG, resource_name=self.draw(st.sampled_from(names)),
                             name="cleanup.policy", value=value)]

    def isr_change(self) -> list[Record] | None:
        options = []
        for tid, pid, part in self.partitions():
            if part.leader == NO_LEADER:
                continue
            options += [(tid, pid, part, "shrink", f) for f in part.isr if f != part.leader]
            options += [(tid, pid, part, "expand", r) for r in part.replicas
                        if r not in part.isr and self.acceptable(part, r)]
        if not options:
            return None
        tid, pid, part, kind, b = self.draw(st.sampled_from(options))
        isr = (tuple(r for r in part.isr if r != b) if kind == "shrink"
               else tuple(r for r in part.replicas if r in part.isr or r == b))
        rec = self.change(tid, pid, part, isr=isr)
        return [rec] if rec is not None else None

    def elect_leader(self) -> list[Record] | None:
        options = [(tid, pid, b) for tid, pid, part in self.partitions() for b in part.isr
                   if self.acceptable(part, b)]
        if not options:
            return None
        tid, pid, b = self.draw(st.sampled_from(options))
        # The same leader again is a legal record: it only bumps the leader epoch (KAFKA-15021).
        return [self.pcr(tid, pid, leader=b)]

    def directories_for(self, part: PartitionRegistration, replicas: tuple[int, ...]) -> tuple[Uuid, ...] | None:
        """R8.2: survivors keep their directory, new replicas get defaultDir; written only when it differs."""
        if not self.dirs_supported:
            return None
        current = dict(zip(part.replicas, part.directories, strict=True))
        dirs = tuple(current[r] if r in current else self.default_dir(r) for r in replicas)
        return dirs if dirs != part.directories else None

    def reassign(self) -> list[Record] | None:
        options = [(tid, pid, part) for tid, pid, part in self.partitions() if not part.is_reassigning()]
        if not options or not self.brokers:
            return None
        tid, pid, part = self.draw(st.sampled_from(options))
        target = tuple(self.draw(st.lists(st.sampled_from(sorted(self.brokers)), unique=True, min_size=1,
                                          max_size=3)))
        if target == part.replicas:
            return None
        removing = tuple(sorted(set(part.replicas) - set(target)))
        adding = tuple(sorted(set(target) - set(part.replicas)))
        if set(target) <= set(part.isr):
            # R11.1: the ISR already covers the target, so the reassignment completes in this very record.
            isr = tuple(r for r in part.isr if r in target)
            rec = self.change(tid, pid, part, replicas=target, isr=isr, leader=self.elect(part, isr),
                              adding=(), removing=(), directories=self.directories_for(part, target))
        else:
            replicas = target + removing
            rec = self.change(tid, pid, part, replicas=replicas, adding=adding, removing=removing,
                              directories=self.directories_for(part, replicas))
        return [rec] if rec is not None else None

    def complete_reassignment(self) -> list[Record] | None:
        options = []
        for tid, pid, part in self.partitions():
            target = tuple(r for r in part.replicas if r not in part.removing_replicas)
            if part.is_reassigning() and set(target) <= set(part.isr):
                options.append((tid, pid, part, target))
        if not options:
            return None
        tid, pid, part, target = self.draw(st.sampled_from(options))
        isr = tuple(r for r in part.isr if r in target)  # R11.2
        rec = self.change(tid, pid, part, replicas=target, isr=isr, leader=self.elect(part, isr), adding=(),
                          removing=(), directories=self.directories_for(part, target))
        return [rec] if rec is not None else None

    def assign_dir(self) -> list[Record] | None:
        """AssignReplicasToDirs from a replica's broker: into one of its online directories, or (rarely in life)
        into one that has gone offline, which also demotes the replica (R6.4, R6.5)."""
        if not self.dirs_supported:
            return None
        options = []
        for tid, pid, part in self.partitions():
            for b in part.replicas:
                reg = self.image.cluster.brokers.get(b)
                if reg is None or not reg.directories:
                    continue
                current = part.directory(b)
                options += [(tid, pid, part, b, d, False) for d in reg.directories if d != current]
                options += [(tid, pid, part, b, d, True) for d in self.ever_dirs.get(b, [])
                            if d not in reg.directories and d != current]
        if not options:
            return None
        tid, pid, part, b, d, offline = self.draw(st.sampled_from(options))
        dirs = tuple(d if r == b else x for r, x in zip(part.replicas, part.directories, strict=True))
        records: list[Record] = [self.pcr(tid, pid, directories=dirs)]
        if offline:
            demote = self.remove_broker(tid, pid, part, b)  # built from the pre-request state, no Directories
            if demote is not None:
                records.append(demote)
        return records

    def fail_dirs(self) -> list[Record] | None:
        """A heartbeat reporting failed directories: leader/ISR moves for their partitions, then the
        BrokerRegistrationChangeRecord v2 with the remaining online directories (R5.3; [] if none, R5.5)."""
        if not self.dirs_supported:
            return None
        with_dirs = sorted(b for b, reg in self.brokers.items() if reg.directories)
        if not with_dirs:
            return None
        reg = self.brokers[self.draw(st.sampled_from(with_dirs))]
        # Usually some directories survive; losing them all is the R5.5 corner (LogDirs [] = "no change").
        keep_one = len(reg.directories) > 1 and self.draw(st.integers(0, 3)) > 0
        failed = set(self.draw(st.lists(st.sampled_from(reg.directories), unique=True, min_size=1,
                                        max_size=len(reg.directories) - keep_one)))
        records: list[Record] = [rec for tid, pid, part in self.partitions()
                                 if reg.id in part.replicas and part.directory(reg.id) in failed
                                 if (rec := self.remove_broker(tid, pid, part, reg.id)) is not None]
        remaining = tuple(sorted(d for d in reg.directories if d not in failed))
        records.append(BrokerRegistrationChangeRecord(version=2, broker_id=reg.id, broker_epoch=reg.epoch,
                                                      log_dirs=remaining))
        return records

    def upgrade(self) -> list[Record] | None:
        if self.dirs_supported:
            return None
        level = self.draw(st.sampled_from([17, 21]))
        self.mv = MetadataVersion(level)
        return [FeatureLevelRecord(name=FEATURE_NAME, feature_level=level)]

    def noop(self) -> list[Record] | None:
        return [NoOpRecord()]

    #: Operation names, repeated to weight them: partition-level work is what most batches of a real log carry.
    OPERATIONS = (
        *["create_topic"] * 3, *["isr_change"] * 3, *["elect_leader"] * 2, *["reassign"] * 2,
        *["complete_reassignment"] * 2, *["assign_dir"] * 3, *["unfence"] * 2, "fail_dirs", "fence", "register",
        "reregister", "amend", "unregister", "delete_topic", "config", "upgrade", "noop",
    )


@st.composite
def valid_streams(draw: Callable[[st.SearchStrategy[Any]], Any], max_steps: int = 30) -> Stream:
    """A valid metadata stream, batch by batch (see the module docstring)."""
    ctl = _Controller(draw, draw(st.sampled_from([11, 17, 21, 22])))
    # A small cluster first (hypothesis favours short draws; an empty cluster exercises little).
    for _ in range(draw(st.integers(1, 4))):
        ctl.emit(ctl.register() or [])
    for b in sorted(ctl.brokers):
        if draw(st.integers(0, 3)) > 0:
            ctl.emit(ctl.unfence(b) or [])
    for _ in range(draw(st.integers(3, max_steps))):
        for _attempt in range(4):  # a few tries, so most steps do something
            records = getattr(ctl, draw(st.sampled_from(_Controller.OPERATIONS)))()
            if records:
                ctl.emit(records)
                break
    return Stream(tuple(ctl.batches))


def _split(n: int) -> st.SearchStrategy[list[int]]:
    """Sorted cut points 0 < c < n: batches [0, c1), [c1, c2), …"""
    return st.lists(st.integers(1, max(1, n - 1)), unique=True, max_size=8).map(sorted) if n > 1 else st.just([])


def _chunks(records: Sequence[Record], cuts: Sequence[int]) -> list[list[tuple[int, Record]]]:
    bounds = [0, *cuts, len(records)]
    return [[(i, records[i]) for i in range(lo, hi)] for lo, hi in pairwise(bounds)]


# -------------------------------------------------------------------------------------------------------------
# (a) batch-boundary invariance


@SETTINGS
@given(data=st.data())
def test_any_split_into_batches_gives_the_one_shot_image(data: st.DataObject) -> None:
    stream = data.draw(valid_streams())
    records = stream.records
    one_shot = replay_records(records)
    cuts = data.draw(_split(len(records)))

    # A fresh MetadataDelta per batch, applied in turn (MetadataLoader with arbitrary batch sizes).
    image = EMPTY_IMAGE
    for chunk in _chunks(records, cuts):
        delta = MetadataDelta(image)
        for offset, record in chunk:
            delta.replay(record, offset)
        image = delta.apply()
    assert image.same_state(one_shot)
    assert image.last_offset == one_shot.last_offset == len(records) - 1

    # One Replayer, its image read at every cut (including inside an open transaction).
    replayer = Replayer()
    for chunk in _chunks(records, cuts):
        for offset, record in chunk:
            replayer.replay(LogEntry(offset=offset, record=record))
        _ = replayer.image
    assert replayer.image.same_state(one_shot)


@SETTINGS
@given(stream=valid_streams())
def test_every_prefix_image_is_the_replay_of_that_prefix(stream: Stream) -> None:
    """Kafka's harness also stops after every prefix: the image after batch k of one replay equals replaying the
    first k batches from empty."""
    replayer = Replayer()
    done: list[Record] = []
    for batch in stream.batches:
        for record in batch:
            replayer.replay(LogEntry(offset=len(done), record=record))
            done.append(record)
        assert replayer.image.same_state(replay_records(done))


@SETTINGS
@given(data=st.data())
def test_configurations_from_their_records_alone_equal_the_full_replay(data: st.DataObject) -> None:
    """``jbod whatif --tables`` replays only the CONFIGURATION_RECORDS of the log (from a snapshot's topics and
    configs, or from empty): the configurations equal a replay of every record, at any offset — an aborted
    transaction's config change included, which must not take effect."""
    records = list(data.draw(valid_streams()).records)
    if data.draw(st.booleans()):
        records += [BeginTransactionRecord(name="t"), ConfigRecord(resource_type=2, resource_name="aborted",
                                                                   name="min.insync.replicas", value="3"),
                    AbortTransactionRecord(reason="test")]
    entries = [LogEntry(offset=i, record=r) for i, r in enumerate(records)]
    until = data.draw(st.integers(0, len(entries)))
    # A snapshot stands for committed state: it is never taken inside a transaction.
    depth, between = 0, [0]
    for i, r in enumerate(records[:until], start=1):
        depth += 1 if isinstance(r, BeginTransactionRecord) else -1 if isinstance(
            r, EndTransactionRecord | AbortTransactionRecord) else 0
        if depth == 0:
            between.append(i)
    snap = data.draw(st.sampled_from(between))
    full = replay_entries(entries[:until])
    assert configurations_of(entries[:until]) == full.configs
    # From a snapshot taken at ``snap``, as the tables hold one: its topics and configs are all that is read.
    base = replay_records(r for r in replay_entries(entries[:snap]).to_records()
                          if isinstance(r, TopicRecord | ConfigRecord))
    assert configurations_of(entries[snap:until], base) == full.configs


# -------------------------------------------------------------------------------------------------------------
# (b) round trips


@SETTINGS
@given(stream=valid_streams())
def test_image_to_records_round_trip(stream: Stream) -> None:
    image = EMPTY_IMAGE
    for batch in stream.batches:
        image = replay_records(batch, image)
        rebuilt = replay_records(image.to_records())
        assert rebuilt.same_state(image)


@SETTINGS
@given(stream=valid_streams())
def test_every_record_round_trips_through_json(stream: Stream) -> None:
    for record in stream.records:
        assert record_from_json(record_to_json(record)) == record


# -------------------------------------------------------------------------------------------------------------
# (c) invariants hold on valid streams


@SETTINGS
@given(stream=valid_streams())
def test_invariants_hold_after_every_step(stream: Stream) -> None:
    image = EMPTY_IMAGE
    tracker = InvariantTracker()
    offset = 0
    for batch in stream.batches:
        entries = [LogEntry(offset=offset + i, record=r, batch_base_offset=offset) for i, r in enumerate(batch)]
        offset += len(batch)
        after = replay_entries(entries, image)
        assert check_step(image, entries, after) == []
        assert check_image(after) == []
        assert tracker.feed_batch(entries) == []
        assert tracker.image.same_state(after)
        image = after


# -------------------------------------------------------------------------------------------------------------
# (d) mutants raise ReplayFault at the mutated record


def _mutant(draw: Callable[[st.SearchStrategy[Any]], Any], image: MetadataImage) -> Record:
    """One record a valid controller would never write, chosen to fit the state it is inserted into."""
    kinds = ["unknown_topic"]
    parts = [(t.id, pid, p) for t, pid, p in image.topics.partitions()]
    if image.topics.by_id:
        kinds.append("unknown_partition")
    if image.cluster.brokers:
        kinds += ["wrong_epoch", "unknown_broker"]
    if parts:
        kinds += ["wrong_length", "replica_change_wrong_length"]
    if any(reg.directories for reg in image.cluster.brokers.values()):
        kinds.append("foreign_directory")
    kind = draw(st.sampled_from(kinds))
    if kind == "unknown_topic":
        return PartitionChangeRecord(version=1, topic_id=Uuid(5, 99999), partition_id=0, leader=NO_LEADER)
    if kind == "unknown_partition":
        tid = draw(st.sampled_from(sorted(image.topics.by_id, key=str)))
        pid = max(image.topics.by_id[tid].partitions, default=-1) + 1
        return PartitionChangeRecord(version=1, topic_id=tid, partition_id=pid, isr=(1,))
    if kind in ("wrong_epoch", "unknown_broker"):
        reg = image.cluster.brokers[draw(st.sampled_from(sorted(image.cluster.brokers)))]
        if kind == "unknown_broker":
            return BrokerRegistrationChangeRecord(version=0, broker_id=99, broker_epoch=reg.epoch, fenced=-1)
        return BrokerRegistrationChangeRecord(version=0, broker_id=reg.id, broker_epoch=reg.epoch + 1, fenced=-1)
    if kind == "wrong_length":
        tid, pid, part = draw(st.sampled_from(sorted(parts, key=lambda x: (str(x[0]), x[1]))))
        dirs = (Uuid(1, 424242),) * (len(part.replicas) + 1)
        return PartitionChangeRecord(version=1, topic_id=tid, partition_id=pid, directories=dirs)
    if kind == "replica_change_wrong_length":
        tid, pid, part = draw(st.sampled_from(sorted(parts, key=lambda x: (str(x[0]), x[1]))))
        return PartitionChangeRecord(version=1, topic_id=tid, partition_id=pid, replicas=(*part.replicas, 77),
                                     directories=(Uuid(1, 424242),))
    owner = next(reg for reg in image.cluster.brokers.values() if reg.directories)
    return RegisterBrokerRecord(version=3, broker_id=42, broker_epoch=1, incarnation_id=Uuid(3, 3),
                                log_dirs=(owner.directories[0],))


@SETTINGS
@given(data=st.data())
def test_a_mutated_stream_faults_at_the_mutant(data: st.DataObject) -> None:
    stream = data.draw(valid_streams())
    k = data.draw(st.integers(1, len(stream.batches)))  # insert at a batch boundary, after >= 1 batch
    prefix = [r for batch in stream.batches[:k] for r in batch]
    suffix = [r for batch in stream.batches[k:] for r in batch]
    mutant = _mutant(data.draw, replay_records(prefix))
    records = [*prefix, mutant, *suffix]
    at = len(prefix)

    with pytest.raises(ReplayFault) as one_shot:
        replay_records(records)
    assert one_shot.value.offset == at
    assert f"offset {at}" in str(one_shot.value)
    assert type(mutant).__name__ in str(one_shot.value)

    delta = MetadataDelta(replay_records(prefix))
    with pytest.raises(ReplayFault) as batched:
        delta.replay(mutant, at)
    assert batched.value.offset == at


def _image_json_by_replica_view(image: MetadataImage) -> dict[str, Any]:
    """The image JSON contract computed the plain way: every row built from the replica view, then sorted whole."""
    replicas = sorted(
        ({"topicId": str(r.topic_id), "partitionId": r.partition_id, "brokerId": r.broker_id,
          "directory": str(r.directory), "directoryState": r.directory_state.value, "offline": r.offline,
          "offlineReason": r.offline_reason.value if r.offline_reason else None}
         for r in replica_view(image)),
        key=lambda r: (r["topicId"], r["partitionId"], r["brokerId"]))
    partitions = sorted(
        ({"topicId": str(t.id), "partitionId": pid, "replicas": list(p.replicas), "isr": list(p.isr),
          "leader": p.leader, "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
          "directories": [str(d) for d in p.directories], "addingReplicas": list(p.adding_replicas),
          "removingReplicas": list(p.removing_replicas), "eligibleLeaderReplicas": list(p.elr),
          "lastKnownElr": list(p.last_known_elr)}
         for t, pid, p in image.topics.partitions()),
        key=lambda p: (p["topicId"], p["partitionId"]))
    topics = sorted(({"topicId": str(t.id), "name": t.name} for t in image.topics.by_id.values()),
                    key=lambda t: t["topicId"])
    return {"topics": topics, "partitions": partitions, "replicas": replicas}


@SETTINGS
@given(stream=valid_streams())
def test_image_json_equals_the_replica_view_sorted_whole(stream: Stream) -> None:
    """image_to_json emits rows in contract order without a global sort; it must equal the plain derivation. Its
    text is what image_json_text_of writes straight from the image."""
    image = EMPTY_IMAGE
    for batch in stream.batches:
        image = replay_records(batch, image)
        doc = image_to_json(image)
        assert {k: doc[k] for k in ("topics", "partitions", "replicas")} == _image_json_by_replica_view(image)
        assert image_json_text(doc) == dumps(doc)
        # The fast writer (image_json_text_of) prints exactly the reference document's text.
        assert image_json_text_of(image) == image_json_text(doc)


@SETTINGS
@given(stream=valid_streams(max_steps=12), names=st.lists(st.text(), min_size=1, max_size=4),
       extra=st.dictionaries(st.sampled_from(["unknown", "gapConsequences"]),
                             st.lists(st.dictionaries(st.text(max_size=4), st.integers() | st.text() | st.none()),
                                      max_size=3)),
       last_offset=st.integers(min_value=-1, max_value=2**80))
def test_image_json_text_of_equals_the_reference_for_any_text_and_extra_keys(
        stream: Stream, names: list[str], extra: dict[str, Any], last_offset: int) -> None:
    """Topic names of any text (escapes, non-ASCII), integers beyond 64 bits (the reference falls back
    to ``json``) and the keys a skip-policy replay adds: still the reference text."""
    image = replay_records([r for batch in stream.batches for r in batch])
    by_id = {tid: replace(t, name=names[i % len(names)]) for i, (tid, t) in enumerate(image.topics.by_id.items())}
    image = replace(image, topics=TopicsImage(by_id, image.topics.by_name), last_offset=last_offset)
    assert image_json_text_of(image, extra) == image_json_text({**image_to_json(image), **extra})
    # ``jbod image --json`` writes it in pieces (of 4096 rows; 3 here, so that small images are split too).
    assert "".join(image_json_pieces(image, extra, rows=3)) == image_json_text_of(image, extra)


def test_image_json_text_is_dumps_for_what_orjson_cannot_write_alike() -> None:
    doc = {"name": "tópic\u2028/<>", "big": 2**70, "none": None, "flag": True, "ids": [1, -1]}
    assert image_json_text(doc) == dumps(doc)
    assert image_json_text({"name": "tópic"}) == dumps({"name": "tópic"})
