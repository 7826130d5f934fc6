-- Query-based capture of the demo's second table (sql/04_second_table.sql), as sql/query_capture.sql
-- does for customer: `make demo CAPTURE=query` runs it right after step 6 creates the table. Until
-- then the job leaves the table out of its polls with an ERROR naming this fix.
USE salesdb;

ALTER TABLE orders
  ADD COLUMN cdc_modified_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  ADD INDEX orders_cdc_modified_at (cdc_modified_at);
