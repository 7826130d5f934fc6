-- Data and delete files of the customer table: many small files mean compaction is due.
SELECT content,
       COUNT(*)                          AS files,
       SUM(record_count)                 AS records,
       ROUND(SUM(file_size_in_bytes) / 1048576.0, 2) AS size_mib
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer$files"
GROUP BY content
ORDER BY content;
