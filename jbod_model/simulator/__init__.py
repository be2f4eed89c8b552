"""A deterministic discrete-event simulator of a KRaft cluster with JBOD log directories (KIP-858).

Brokers with several log dirs (``broker``) follow Kafka 3.9's broker rules and drive the reference controller
(``jbod_model.controller``) on a simulated clock (``cluster.Simulation``). A run yields the request stream, the
metadata log (real segments and a snapshot), one meta.properties per disk and a ground-truth timeline of which
replica was physically offline when and why (``output``, ``truth``); the KIP's TLA+ properties are checked as it
goes (``checks``). Named scenarios (``scenarios``) script the cases operators hit; ``generator`` builds random and
sized runs. See docs/simulator.md.
"""

from __future__ import annotations

from jbod_model.simulator.checks import Explanation, KnownIssue, PropertyViolation, TlaProperty, explain
from jbod_model.simulator.cluster import FailedDirPolicy, Simulation, SimulationError
from jbod_model.simulator.config import BrokerSpec, MetadataDirPlacement, SimulationConfig, Timings
from jbod_model.simulator.generator import RandomRunSpec, random_run, sized_run
from jbod_model.simulator.history import DirectoryInfo, DirectoryStatus, Happening, HappeningKind
from jbod_model.simulator.output import OutputPaths, OutputWriter, SimulationResult, write_result
from jbod_model.simulator.scenarios import SCENARIOS, Scenario, run_scenario
from jbod_model.simulator.truth import OfflineInterval, TruthReason, compare_with_image

__all__ = [
    "SCENARIOS",
    "BrokerSpec",
    "DirectoryInfo",
    "DirectoryStatus",
    "Explanation",
    "FailedDirPolicy",
    "Happening",
    "HappeningKind",
    "KnownIssue",
    "MetadataDirPlacement",
    "OfflineInterval",
    "OutputPaths",
    "OutputWriter",
    "PropertyViolation",
    "RandomRunSpec",
    "Scenario",
    "Simulation",
    "SimulationConfig",
    "SimulationError",
    "SimulationResult",
    "Timings",
    "TlaProperty",
    "TruthReason",
    "compare_with_image",
    "explain",
    "random_run",
    "run_scenario",
    "sized_run",
    "write_result",
]
