"""Replica placement for new partitions: a deterministic ``StripedReplicaPlacer``.

Mirrors ``org.apache.kafka.metadata.placement.StripedReplicaPlacer`` (rack striping, unfenced brokers first,
the leader always unfenced) with its randomness removed so a replay is reproducible: every rack and broker
list starts at offset 0 instead of ``random.nextInt(size)``, and the reshuffle Kafka does after each full
round of partitions is skipped (the rotating offsets alone keep leaders spread). Placement never looks at
directories (R7.2); the directories of a new replica come from ``defaultDir`` (R7.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jbod_model.controller.context import UsableBroker
from jbod_model.errors import RequestRejected
from jbod_model.errors_codes import Errors


class InvalidReplicationFactor(RequestRejected):
    """``InvalidReplicationFactorException`` from the placer; callers wrap its message."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.INVALID_REPLICATION_FACTOR, message)


@dataclass(slots=True)
class _BrokerList:
    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def next(self, epoch: int) -> int:
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass(slots=True)
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next_unfenced(self, epoch: int) -> int:
        return self.unfenced.next(epoch)

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _check_positive(replication_factor: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactor(f"Invalid replication factor {replication_factor}: the replication factor "
                                       "must be positive.")


def _check_unfenced(num_unfenced: int) -> None:
    if num_unfenced == 0:
        raise InvalidReplicationFactor("All brokers are currently fenced.")


def _check_enough(replication_factor: int, num_total: int) -> None:
    if replication_factor > num_total:
        raise InvalidReplicationFactor(f"The target replication factor of {replication_factor} cannot be reached "
                                       f"because only {num_total} broker(s) are registered.")


class _RackList:
    """``StripedReplicaPlacer.RackList`` without randomness."""

    def __init__(self, brokers: Sequence[UsableBroker]) -> None:
        self._racks: dict[str | None, _Rack] = {}
        self.num_total = 0
        self.num_unfenced = 0
        for broker in brokers:
            rack = self._racks.setdefault(broker.rack, _Rack())
            if broker.fenced:
                rack.fenced.brokers.append(broker.id)
            else:
                self.num_unfenced += 1
                rack.unfenced.brokers.append(broker.id)
            self.num_total += 1
        for rack in self._racks.values():
            rack.fenced.brokers.sort()
            rack.unfenced.brokers.sort()
        # OptionalStringComparator: the "no rack" entry sorts first.
        self._rack_names = sorted(self._racks, key=lambda r: (r is not None, r or ""))
        self._epoch = 0
        self._offset = 0

    def place(self, replication_factor: int) -> list[int]:
        _check_positive(replication_factor)
        _check_enough(replication_factor, self.num_total)
        _check_unfenced(self.num_unfenced)
        if self._epoch == self.num_unfenced and self.num_unfenced > 1:
            # Kafka reshuffles racks and brokers here; the deterministic placer only restarts the round.
            self._epoch = 0
        if self._offset == len(self._rack_names):
            self._offset = 0
        brokers: list[int] = []
        first_rack_index = self._offset
        while True:
            result = self._racks[self._rack_names[first_rack_index]].next_unfenced(self._epoch)
            if result >= 0:
                brokers.append(result)
                break
            first_rack_index = (first_rack_index + 1) % len(self._rack_names)
        rack_index = self._offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if rack_index == first_rack_index:
                    first_rack_index = -1
                else:
                    result = self._racks[self._rack_names[rack_index]].next(self._epoch)
                rack_index = (rack_index + 1) % len(self._rack_names)
            brokers.append(result)
        self._epoch += 1
        self._offset += 1
        return brokers


def place_replicas(brokers: Sequence[UsableBroker], num_partitions: int,
                   replication_factor: int) -> list[list[int]]:
    """Mirrors ``StripedReplicaPlacer.place`` (deterministic): one replica list per new partition.

    Raises :class:`InvalidReplicationFactor` for a non-positive factor, when every broker is fenced, or when
    fewer brokers are registered than the factor.
    """
    racks = _RackList(brokers)
    _check_positive(replication_factor)
    _check_unfenced(racks.num_unfenced)
    _check_enough(replication_factor, racks.num_total)
    return [racks.place(replication_factor) for _ in range(num_partitions)]
