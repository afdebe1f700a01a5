"""The `zkcoord migrate` workflow: a checked per-group state machine (states), and the runner that carries
out each step against ZooKeeper and the broker with a journal and a marker znode (runner)."""

from migration.workflow.runner import Journal, MigrationRunner, StepFailed, StepOutcome, marker_path
from migration.workflow.states import IllegalStep, Marker, MigrationState, Step

__all__ = [
    "IllegalStep",
    "Journal",
    "Marker",
    "MigrationRunner",
    "MigrationState",
    "Step",
    "StepFailed",
    "StepOutcome",
    "marker_path",
]
