-- Query-based capture (--source jdbc, MariaDB / MySQL): the modification column the job polls.
-- The server keeps it: every INSERT sets it (DEFAULT) and every UPDATE that changes the row sets it
-- (ON UPDATE), whatever the application writes in its own columns. TIMESTAMP(6) is stored in UTC,
-- whatever the writers' session time zones; microseconds keep a burst of changes apart; the index
-- makes each poll a range scan. Run it once per captured table, then capture the table with
--   --source jdbc --jdbc_tables salesdb.customer:cdc_modified_at
-- The new column is an ordinary column of the lake table too.
USE salesdb;

ALTER TABLE customer
  ADD COLUMN cdc_modified_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  ADD INDEX customer_cdc_modified_at (cdc_modified_at);
-- Soft deletes (--jdbc_soft_delete is_deleted=1): the application flags a row instead of deleting it,
-- and the flagging UPDATE moves cdc_modified_at like any other.
-- ALTER TABLE customer ADD COLUMN is_deleted TINYINT NOT NULL DEFAULT 0;
