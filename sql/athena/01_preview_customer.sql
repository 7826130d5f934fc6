-- Preview of the customer table as the CDC job keeps it (latest state of every source row).
SELECT *
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer"
LIMIT 50;
