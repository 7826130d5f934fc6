-- Query-based capture (--source jdbc, PostgreSQL): the modification column the job polls.
-- PostgreSQL has no ON UPDATE clause: a BEFORE INSERT OR UPDATE trigger sets the column to the
-- statement's clock time on every row written, whatever the application writes. The function
-- takes the column's name as its argument, so one function serves every table. timestamptz is
-- an instant (no time-zone ambiguity); the index makes each poll a range scan. Then capture with
--   --source jdbc --jdbc_tables public.customer:cdc_modified_at
-- As the tables' owner (sql/postgres/01_create_customer.sql), who may alter them.
SET ROLE salesdb_owner;

CREATE OR REPLACE FUNCTION cdc_set_modified_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW := jsonb_populate_record(NEW, jsonb_build_object(TG_ARGV[0], clock_timestamp()));
  RETURN NEW;
END
$$;

ALTER TABLE customer ADD COLUMN cdc_modified_at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX customer_cdc_modified_at ON customer (cdc_modified_at);
CREATE TRIGGER customer_cdc_modified_at BEFORE INSERT OR UPDATE ON customer
  FOR EACH ROW EXECUTE FUNCTION cdc_set_modified_at('cdc_modified_at');
-- Soft deletes (--jdbc_soft_delete is_deleted=true): the flagging UPDATE fires the trigger too.
-- ALTER TABLE customer ADD COLUMN is_deleted boolean NOT NULL DEFAULT false;
