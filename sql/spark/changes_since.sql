-- What changed in one lake table since a point in time, on every table format (Spark SQL).
-- ${table}: the lake table; ${markers}: its delete markers, ${table}__cdc_deletes (absent until the
-- table's first delete: then read the first part alone); ${since}: a timestamp, the reader's last
-- high-water mark minus an overlap (docs/OPERATIONS.md, "Reading what changed").
-- One row per key and kind: 'upsert' with the row as it is now; 'delete' with the deleted row's
-- image as JSON; 'truncate': every key older than its _cdc_seq is gone. Apply them in _cdc_seq
-- order, each only when newer than what you hold for its key.
SELECT 'upsert' AS change, _cdc_seq, _cdc_offset, _cdc_ingested_at AS applied_at,
       to_json(struct(t.*)) AS row_json
FROM ${table} t
WHERE _cdc_ingested_at > ${since}
UNION ALL
SELECT CASE WHEN _cdc_key = '*' THEN 'truncate' ELSE 'delete' END AS change,
       _cdc_seq, _cdc_offset, _cdc_deleted_at AS applied_at, _cdc_row AS row_json
FROM ${markers}
WHERE _cdc_deleted_at > ${since}
ORDER BY _cdc_seq, _cdc_offset
