-- Table history: which snapshot was current when (rollbacks show is_current_ancestor = false).
SELECT made_current_at,
       snapshot_id,
       parent_id,
       is_current_ancestor
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer$history"
ORDER BY made_current_at DESC
LIMIT 100;
