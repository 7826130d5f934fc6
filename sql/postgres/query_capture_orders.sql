-- Query-based capture of the demo's second table (sql/postgres/04_second_table.sql), with the
-- function sql/postgres/query_capture.sql created: `make demo SOURCE=postgres CAPTURE=query` runs it
-- right after step 6 creates the table. Until then the job leaves the table out of its polls with an
-- ERROR naming this fix.
SET ROLE salesdb_owner;

ALTER TABLE orders ADD COLUMN cdc_modified_at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX orders_cdc_modified_at ON orders (cdc_modified_at);
CREATE TRIGGER orders_cdc_modified_at BEFORE INSERT OR UPDATE ON orders
  FOR EACH ROW EXECUTE FUNCTION cdc_set_modified_at('cdc_modified_at');
