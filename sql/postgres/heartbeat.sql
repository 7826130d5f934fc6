-- The heartbeat table of the PostgreSQL source: one row, which the connector's heartbeat.action.query
-- (cloudformation/connector/debezium-postgres.json) writes every heartbeat.interval.ms. The table is in
-- a captured schema, so in the connector's filtered publication: the write is a change the connector
-- receives and confirms, so the replication slot advances while the captured tables are quiet and other
-- databases of the server (on RDS: its own) write WAL. The job counts its events as heartbeats and
-- never makes a lake table of it (cdclake/events/envelope.py).
--
-- Run it once per database, as a superuser or the owner role, in the database the connector reads
-- (the stack's bootstrap does, before sql/postgres/ddl_capture.sql):
--   psql -v schema=public -v owner=salesdb_owner -v publication=dbz_publication -f heartbeat.sql
-- The same variables as ddl_capture.sql, with the same defaults. Running it again is safe.
\set ON_ERROR_STOP 1
\if :{?schema}
\else
  \set schema public
\endif
\if :{?owner}
\else
  SELECT current_database() || '_owner' AS owner \gset
\endif
\if :{?publication}
\else
  \set publication dbz_publication
\endif
SET client_min_messages = warning;

CREATE TABLE IF NOT EXISTS :"schema".cdclake_heartbeat (
  id      integer     PRIMARY KEY CHECK (id = 1),
  beat_at timestamptz NOT NULL DEFAULT now()
);
-- The connector's filtered publication sets its tables at every start, which only their owner may do.
ALTER TABLE :"schema".cdclake_heartbeat OWNER TO :"owner";
ALTER TABLE :"schema".cdclake_heartbeat REPLICA IDENTITY FULL;  -- as every captured table
INSERT INTO :"schema".cdclake_heartbeat (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- A running connector takes the table into its publication at its next start; this one needs it now.
SELECT format('ALTER PUBLICATION %I ADD TABLE %I.cdclake_heartbeat', :'publication', :'schema')
 WHERE EXISTS (SELECT FROM pg_publication WHERE pubname = :'publication' AND NOT puballtables)
   AND NOT EXISTS (SELECT FROM pg_publication_tables WHERE pubname = :'publication'
                   AND schemaname = :'schema' AND tablename = 'cdclake_heartbeat') \gexec
