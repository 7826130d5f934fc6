-- What changed in the customer table in the last hour: rows inserted or updated (as they are now)
-- and keys deleted (from the delete markers beside the table, which exist after its first delete;
-- a source TRUNCATE is one 'truncate' row: every key older than its _cdc_seq is gone).
-- Read again with an overlap and apply each change in _cdc_seq order only when newer than what you
-- hold: docs/OPERATIONS.md, "Reading what changed".
SELECT 'upsert' AS change, id, _cdc_seq, _cdc_ingested_at AS applied_at
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer"
WHERE _cdc_ingested_at > current_timestamp - interval '1' hour
UNION ALL
SELECT CASE WHEN _cdc_key = '*' THEN 'truncate' ELSE 'delete' END,
       CAST(json_extract_scalar(_cdc_key, '$.id') AS integer), _cdc_seq, _cdc_deleted_at
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer__cdc_deletes"
WHERE _cdc_deleted_at > current_timestamp - interval '1' hour
ORDER BY _cdc_seq;
