-- Row count of the customer table; after the seed snapshot it matches SELECT COUNT(*) in MySQL (30).
SELECT COUNT(*) AS customer_rows
FROM "${GlueDatabaseName}"."${SourceTablePrefix}_customer";
