-- Preview of the customer table as the CDC job keeps it (latest state of every source row).
SELECT *
FROM "${GlueDatabaseName}"."${SourceDatabase}_customer"
LIMIT 50;
