-- Iceberg snapshots of the customer table: one per committed micro-batch that changed it, newest first.
SELECT committed_at,
       snapshot_id,
       parent_id,
       operation,
       summary['added-records']   AS added_records,
       summary['deleted-records'] AS deleted_records,
       summary['total-records']   AS total_records
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer$snapshots"
ORDER BY committed_at DESC
LIMIT 100;
