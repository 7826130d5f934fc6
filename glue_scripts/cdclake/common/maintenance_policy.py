"""The limits and settings of table maintenance (job arguments `--maintenance_*`), with their
defaults. Apart from the maintenance runner (maintenance.py) so that the job's arguments
(settings.py) take their defaults from here without importing it."""

from __future__ import annotations

from dataclasses import dataclass

from .conflicts import RetryPolicy

MIB = 1024 * 1024
# remove_orphan_files refuses a younger cut-off: a file that young may belong to a commit in flight.
MIN_ORPHAN_AGE_HOURS = 24
# Iceberg's own default: a file under 75% of the target size is a compaction candidate.
SMALL_FILE_RATIO = 0.75


@dataclass(frozen=True)
class MaintenancePolicy:
    """Limits and settings of table maintenance (job arguments `--maintenance_*`)."""

    target_file_size_mb: int = 128
    min_input_files: int = 5
    max_small_files: int = 50
    max_delete_files: int = 20
    delete_file_threshold: int = 5
    max_snapshots: int = 200
    snapshot_retention_minutes: int = 120
    retain_last_snapshots: int = 10
    max_manifests: int = 100
    remove_orphans: bool = False
    orphan_min_age_hours: int = 72
    conflict_retries: int = 5
    delete_retention_days: int = 30

    @property
    def target_file_size_bytes(self) -> int:
        return self.target_file_size_mb * MIB

    @property
    def small_file_bytes(self) -> int:
        return int(self.target_file_size_bytes * SMALL_FILE_RATIO)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(attempts=self.conflict_retries + 1)
