-- Time travel: the customer table as it was 15 minutes ago next to now (row counts).
SELECT 'now' AS as_of, COUNT(*) AS customer_rows
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer"
UNION ALL
SELECT '15 minutes ago', COUNT(*)
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer"
FOR TIMESTAMP AS OF (current_timestamp - interval '15' minute);
