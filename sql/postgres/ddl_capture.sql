-- DDL capture for the PostgreSQL source: every DDL command on a table becomes a row of
-- <schema>.cdclake_ddl, in the transaction of the command, so that the Debezium connector streams it
-- with the data changes, in WAL (LSN) order, and the lake job follows column renames and drops, a
-- column dropped and added again, and table renames (docs/ARCHITECTURE.md, "Source DDL").
--
-- Run it once per database, as a superuser (on RDS for PostgreSQL: the master user, a member of
-- rds_superuser; event triggers need it), in the database the connector reads:
--   psql -v schema=public -v owner=salesdb_owner -v publication=dbz_publication -f ddl_capture.sql
-- schema: a schema the connector captures (schema.include.list), default public; owner: the role that
-- owns the captured tables and the publication (the Debezium user is a member), default
-- <database>_owner; publication: the connector's, default dbz_publication. Running it again is safe.
-- Remove it with: DROP EVENT TRIGGER cdclake_ddl_end; DROP EVENT TRIGGER cdclake_ddl_drop;
--
-- Why the catalog and not the statement text: current_query() is the client's whole query string,
-- which may hold several statements; the triggers record what each command did instead, found by
-- comparing the table's columns (by their attnum, which a rename keeps) and primary key with the
-- ones the table's previous row recorded. The statement text is kept beside it, for people.
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

CREATE TABLE IF NOT EXISTS :"schema".cdclake_ddl (
  id              bigserial   PRIMARY KEY,
  txid            bigint      NOT NULL DEFAULT txid_current(),  -- the command's transaction
  logged_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  command_tag     text        NOT NULL,   -- ALTER TABLE, CREATE TABLE, DROP TABLE, ... (or BASELINE)
  object_identity text,                   -- e.g. public.customer, public.customer.town (a renamed column)
  table_oid       bigint      NOT NULL,
  schema_name     text        NOT NULL,   -- the table's name after the command
  table_name      text        NOT NULL,
  old_schema_name text,                   -- its name before, when the command renamed or moved it
  old_table_name  text,
  -- What the command did, in order: [kind, old, new] with kind drop, rename, add, type (the column's
  -- type before and after), key (the primary key columns before and after), create, drop_table,
  -- using (a column retyped with USING: [using, column, type]), generated (a generated column the
  -- command created: [generated, column, null]) and relabel (a column of an enum whose value ALTER TYPE
  -- ... RENAME VALUE renamed: [relabel, column, [old, new] or null when unknown]) and default (a column
  -- the command added whose value for the rows the table had is one constant: [default, column, its
  -- text, or null for none]); on a partitioned table, attach and detach (a partition attached or created,
  -- detached or dropped: [attach|detach, [schema, table], {key, bound, others, rows}], key and bounds as
  -- pg_get_partkeydef/pg_get_expr write them, others the bounds of the partitions left, rows whether an
  -- attached table brought rows).
  changes         jsonb       NOT NULL,
  columns         jsonb       NOT NULL,   -- after the command: {"<attnum>": [name, type]}
  primary_key     jsonb       NOT NULL,   -- after the command: [column, ...]
  statement       text,                   -- current_query(): the client's query string
  partitions      jsonb                   -- a partitioned table's after the command: {key, parts: {oid: [schema, table, bound]}}
);
ALTER TABLE :"schema".cdclake_ddl ADD COLUMN IF NOT EXISTS partitions jsonb;  -- a capture installed before it
CREATE INDEX IF NOT EXISTS cdclake_ddl_table ON :"schema".cdclake_ddl (table_oid, id);
ALTER TABLE :"schema".cdclake_ddl OWNER TO :"owner";
ALTER TABLE :"schema".cdclake_ddl REPLICA IDENTITY FULL;  -- as every captured table (never updated)

-- The columns and primary key of a table, as the catalog has them now.
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_state(rel oid, OUT cols jsonb, OUT pk jsonb)
LANGUAGE sql STABLE AS $$
  SELECT
    (SELECT coalesce(jsonb_object_agg(a.attnum::text, jsonb_build_array(a.attname, format_type(a.atttypid, a.atttypmod))), '{}')
       FROM pg_attribute a WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped),
    (SELECT coalesce(jsonb_agg(a.attname ORDER BY k.ord), '[]')
       FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
      WHERE i.indrelid = rel AND i.indisprimary)
$$;

-- A partitioned table's key and partitions now (null for any other table).
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_parts(rel oid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('key', pg_get_partkeydef(rel), 'parts',
           (SELECT coalesce(jsonb_object_agg(c.oid::text, jsonb_build_array(n.nspname, c.relname,
                                             pg_get_expr(c.relpartbound, c.oid))), '{}')
              FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE i.inhparent = rel))
   WHERE EXISTS (SELECT FROM pg_class WHERE oid = rel AND relkind = 'p')
$$;

-- Partitions attached (or created) and detached (or dropped) between two states of a partitioned table:
-- the rows of a detached one leave the table, an attached one's come in, without row events.
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_partdiff(was jsonb, now jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  out jsonb := '[]';
  c record;
  has_rows boolean;
  others jsonb := (SELECT coalesce(jsonb_agg(v->2), '[]') FROM jsonb_each(now->'parts') e(k, v));
BEGIN
  IF now IS NULL OR was IS NULL THEN  -- not partitioned, or its state before is not known (an older capture's row)
    RETURN out;
  END IF;
  FOR c IN SELECT key, value FROM jsonb_each(coalesce(was->'parts', '{}')) WHERE NOT now->'parts' ? key LOOP
    out := out || jsonb_build_array(jsonb_build_array('detach', jsonb_build_array(c.value->>0, c.value->>1),
             jsonb_build_object('key', now->>'key', 'bound', c.value->>2, 'others', others)));
  END LOOP;
  FOR c IN SELECT key, value FROM jsonb_each(now->'parts') WHERE NOT coalesce(was->'parts', '{}') ? key LOOP
    EXECUTE format('SELECT EXISTS (SELECT FROM %I.%I)', c.value->>0, c.value->>1) INTO has_rows;
    out := out || jsonb_build_array(jsonb_build_array('attach', jsonb_build_array(c.value->>0, c.value->>1),
             jsonb_build_object('key', now->>'key', 'bound', c.value->>2, 'rows', has_rows)));
  END LOOP;
  RETURN out;
END $$;

-- What changed between two states of one table: drops, renames and type changes in column order,
-- then added columns, then the primary key.
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_diff(was jsonb, was_pk jsonb, now jsonb, now_pk jsonb)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  out jsonb := '[]';
  c record;
BEGIN
  FOR c IN SELECT key, value FROM jsonb_each(was) ORDER BY key::int LOOP
    IF NOT now ? c.key THEN
      out := out || jsonb_build_array(jsonb_build_array('drop', c.value->>0, NULL));
    ELSE
      IF now->c.key->>0 <> c.value->>0 THEN
        out := out || jsonb_build_array(jsonb_build_array('rename', c.value->>0, now->c.key->>0));
      END IF;
      IF now->c.key->>1 <> c.value->>1 THEN
        out := out || jsonb_build_array(jsonb_build_array('type', c.value->>1, now->c.key->>1));
      END IF;
    END IF;
  END LOOP;
  FOR c IN SELECT key, value FROM jsonb_each(now) WHERE NOT was ? key ORDER BY key::int LOOP
    out := out || jsonb_build_array(jsonb_build_array('add', NULL, c.value->>0));
  END LOOP;
  IF now_pk <> was_pk THEN
    out := out || jsonb_build_array(jsonb_build_array('key', was_pk, now_pk));
  END IF;
  RETURN out;
END $$;

-- ddl_command_end: one row per table a command created or altered (renamed columns, moved tables).
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  log_table oid := to_regclass('cdclake_ddl');
  r record;
  prev record;
  st record;
  found_prev boolean;
  diff jsonb;
  parts jsonb;
BEGIN
  IF log_table IS NULL THEN
    RAISE WARNING 'cdclake DDL capture: table cdclake_ddl is gone, % not recorded', tg_tag
      USING HINT = 'run sql/postgres/ddl_capture.sql again, or remove the capture: DROP EVENT TRIGGER cdclake_ddl_end; DROP EVENT TRIGGER cdclake_ddl_drop;';
    RETURN;
  END IF;
  -- The tables of the command, and the partitioned tables one of them is a partition of (CREATE TABLE ...
  -- PARTITION OF names the partition only): a parent's row only when its partitions changed.
  FOR r IN
    SELECT DISTINCT ON (c.objid) c.objid, c.command_tag, c.object_identity, cl.relname::text AS relname,
           n.nspname::text AS nspname, c.object_type = 'parent' AS parent_only
      FROM (SELECT objid, classid, command_tag, object_identity, object_type FROM pg_event_trigger_ddl_commands()
            UNION ALL
            SELECT i.inhparent, d.classid, 'ALTER TABLE', NULL, 'parent'
              FROM pg_event_trigger_ddl_commands() d JOIN pg_inherits i ON i.inhrelid = d.objid
             WHERE d.classid = 'pg_class'::regclass) c
      JOIN pg_class cl ON cl.oid = c.objid
      JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE c.classid = 'pg_class'::regclass AND cl.relkind IN ('r', 'p') AND cl.relpersistence <> 't'
       AND cl.oid <> log_table AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
     ORDER BY c.objid, c.object_type = 'parent', c.object_type = 'table column' DESC
  LOOP
    SELECT * INTO st FROM cdclake_ddl_state(r.objid);
    SELECT * INTO prev FROM cdclake_ddl WHERE table_oid = r.objid ORDER BY id DESC LIMIT 1;
    -- A table oid is reused only after its table is gone.
    found_prev := FOUND AND NOT prev.changes @> '[["drop_table"]]';
    diff := CASE WHEN found_prev THEN cdclake_ddl_diff(prev.columns, prev.primary_key, st.cols, st.pk)
                 WHEN r.command_tag IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO') THEN '[["create", null, null]]'
                 ELSE '[]' END;
    IF found_prev THEN
      diff := diff || cdclake_ddl_using(prev.columns, st.cols, current_query());
      diff := diff || cdclake_ddl_defaults(r.objid, diff);
    END IF;
    diff := diff || cdclake_ddl_generated(r.objid, CASE WHEN found_prev THEN prev.columns ELSE '{}' END);
    parts := cdclake_ddl_parts(r.objid);
    diff := diff || cdclake_ddl_partdiff(CASE WHEN found_prev THEN prev.partitions END, parts);
    CONTINUE WHEN r.parent_only AND diff = '[]';
    INSERT INTO cdclake_ddl (command_tag, object_identity, table_oid, schema_name, table_name, old_schema_name,
                             old_table_name, changes, columns, primary_key, statement, partitions)
    VALUES (
      r.command_tag, r.object_identity, r.objid, r.nspname, r.relname,
      CASE WHEN found_prev AND (prev.schema_name, prev.table_name) <> (r.nspname, r.relname) THEN prev.schema_name END,
      CASE WHEN found_prev AND (prev.schema_name, prev.table_name) <> (r.nspname, r.relname) THEN prev.table_name END,
      diff, st.cols, st.pk, current_query(), parts);
  END LOOP;
  -- ALTER TYPE <enum> RENAME VALUE: no table changes, but every stored value of the label reads anew.
  FOR r IN
    SELECT DISTINCT c.objid FROM pg_event_trigger_ddl_commands() c JOIN pg_type t ON t.oid = c.objid
     WHERE c.classid = 'pg_type'::regclass AND c.command_tag = 'ALTER TYPE' AND t.typtype = 'e'
       AND current_query() ~* '\mrename\s+value\M'
  LOOP
    PERFORM cdclake_ddl_relabel(r.objid, log_table);
  END LOOP;
END $$;

-- The columns of an ALTER TABLE ... TYPE ... USING <expression>: PostgreSQL rewrites their stored values
-- with the expression and logs no row change, so the lake cannot follow them. From the query text (the
-- catalog keeps no USING): the columns the text names before TYPE ... USING, or, when it names none
-- the pattern finds, every column whose type changed, as [using, column, type]. A query string holding
-- several statements may add an entry too many, never one too few.
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_using(was jsonb, now jsonb, query text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  WITH named AS (
    SELECT CASE WHEN m[1] LIKE '"%' THEN replace(substr(m[1], 2, length(m[1]) - 2), '""', '"') ELSE lower(m[1]) END AS name
      FROM regexp_matches(query, '\malter\s+(?:column\s+)?("(?:[^"]|"")+"|[^\s"(),;]+)\s+(?:set\s+data\s+)?type\M'
                                 '(?:(?!\malter\M)[^;])*?\musing\M', 'gi') m)
  SELECT coalesce(jsonb_agg(jsonb_build_array('using', now->k->>0, now->k->>1) ORDER BY k::int), '[]')
    FROM jsonb_object_keys(now) k
   WHERE query ~* '\mtype\M[^;]*\musing\M'
     AND CASE WHEN EXISTS (SELECT FROM named) THEN now->k->>0 IN (SELECT name FROM named)
              ELSE was ? k AND was->k->>1 IS DISTINCT FROM now->k->>1 END
$$;

-- The value the rows a table had read in each column the command added: PostgreSQL keeps a default
-- that is no volatile expression (a constant, CURRENT_DATE, now()) as the column's missing value, one
-- for every such row, and writes no row change: [default, column, text] (ISO dates, full float
-- digits), [default, column, null] for a column added without a default. A volatile default (the
-- table rewritten, each row its own value) records nothing: the column waits for the next row event.
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_defaults(rel oid, diff jsonb)
RETURNS jsonb LANGUAGE sql STABLE
SET datestyle = 'ISO, YMD' SET timezone = 'UTC' SET extra_float_digits = 3 AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_array('default', a.attname,
                    CASE WHEN a.atthasmissing THEN (a.attmissingval::text::text[])[1] END) ORDER BY a.attnum), '[]')
    FROM jsonb_array_elements(diff) d JOIN pg_attribute a ON a.attrelid = rel AND a.attname = d->>2
   WHERE d->>0 = 'add' AND NOT a.attisdropped AND a.attgenerated = '' AND (a.atthasmissing OR NOT a.atthasdef)
$$;

-- The table's generated columns the command created (pgoutput does not send them): [generated, column, null].
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_generated(rel oid, was jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_array('generated', a.attname, NULL) ORDER BY a.attnum), '[]')
    FROM pg_attribute a
   WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated <> ''
     AND NOT was ? a.attnum::text
$$;

-- One row per table with a column of the enum `typ` (directly, as an array, or through a domain) after
-- ALTER TYPE ... RENAME VALUE: [relabel, column, [old, new]] for each, [relabel, column, null] when the
-- query text does not say which label became which (several RENAME VALUE of the type in one query).
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_relabel(typ oid, log_table oid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  labels jsonb;
  t record;
  st record;
BEGIN
  SELECT CASE WHEN count(*) = 1 THEN jsonb_build_array(min(old), min(new)) END INTO labels
    FROM (SELECT replace(m[1], '''''', '''') AS old, replace(m[2], '''''', '''') AS new
            FROM regexp_matches(current_query(),
                   '\mrename\s+value\s+''((?:[^'']|'''')*)''\s+to\s+''((?:[^'']|'''')*)''', 'gi') m) v
   WHERE EXISTS (SELECT FROM pg_enum e WHERE e.enumtypid = typ AND e.enumlabel = v.new)
     AND NOT EXISTS (SELECT FROM pg_enum e WHERE e.enumtypid = typ AND e.enumlabel = v.old);
  FOR t IN
    SELECT cl.oid, cl.relname::text AS relname, n.nspname::text AS nspname,
           jsonb_agg(jsonb_build_array('relabel', a.attname, labels) ORDER BY a.attnum) AS changes
      FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
      JOIN pg_type ct ON ct.oid = a.atttypid
     WHERE a.attnum > 0 AND NOT a.attisdropped AND cl.relkind IN ('r', 'p') AND cl.relpersistence <> 't'
       AND cl.oid <> log_table AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
       AND typ IN (ct.oid, ct.typelem, ct.typbasetype,
                   (SELECT d.typbasetype FROM pg_type d WHERE d.oid = ct.typelem))
     GROUP BY cl.oid, cl.relname, n.nspname
  LOOP
    SELECT * INTO st FROM cdclake_ddl_state(t.oid);
    INSERT INTO cdclake_ddl (command_tag, object_identity, table_oid, schema_name, table_name, changes, columns,
                             primary_key, statement, partitions)
    VALUES ('ALTER TYPE', format('%I.%I', t.nspname, t.relname), t.oid, t.nspname, t.relname, t.changes, st.cols,
            st.pk, current_query(), cdclake_ddl_parts(t.oid));
  END LOOP;
END $$;

-- sql_drop: one row per table dropped (DROP TABLE, or a DROP ... CASCADE that took it).
CREATE OR REPLACE FUNCTION :"schema".cdclake_ddl_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  r record;
  p record;
  parts jsonb;
  diff jsonb;
BEGIN
  IF to_regclass('cdclake_ddl') IS NULL THEN
    RETURN;  -- dropped itself (or gone before): nothing to record into
  END IF;
  FOR r IN
    SELECT o.objid, o.object_identity, o.schema_name, o.object_name FROM pg_event_trigger_dropped_objects() o
     WHERE o.object_type = 'table' AND NOT o.is_temporary AND o.schema_name <> 'information_schema'
       AND o.schema_name NOT LIKE 'pg\_%'
  LOOP
    INSERT INTO cdclake_ddl (command_tag, object_identity, table_oid, schema_name, table_name, changes, columns,
                             primary_key, statement)
    VALUES (tg_tag, r.object_identity, r.objid, r.schema_name, r.object_name, '[["drop_table", null, null]]', '{}',
            '[]', current_query());
  END LOOP;
  -- A partition dropped takes its rows out of its parent, when the parent stays: the parent's row says so.
  FOR p IN
    SELECT DISTINCT ON (d.table_oid) d.*, cl.relname::text AS relname, n.nspname::text AS nspname
      FROM cdclake_ddl d JOIN pg_class cl ON cl.oid = d.table_oid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE d.partitions IS NOT NULL
       AND EXISTS (SELECT FROM pg_event_trigger_dropped_objects() o
                    WHERE o.object_type = 'table' AND d.partitions->'parts' ? o.objid::text)
     ORDER BY d.table_oid, d.id DESC
  LOOP
    parts := cdclake_ddl_parts(p.table_oid);
    diff := cdclake_ddl_partdiff(p.partitions, parts);
    CONTINUE WHEN diff = '[]';
    INSERT INTO cdclake_ddl (command_tag, object_identity, table_oid, schema_name, table_name, changes, columns,
                             primary_key, statement, partitions)
    VALUES (tg_tag, format('%I.%I', p.nspname, p.relname), p.table_oid, p.nspname, p.relname, diff, p.columns,
            p.primary_key, current_query(), parts);
  END LOOP;
END $$;

-- Found through the schema, and run as the log table's owner: whoever runs DDL may record it.
ALTER FUNCTION :"schema".cdclake_ddl_end() SET search_path = pg_catalog, :"schema", pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_drop() SET search_path = pg_catalog, :"schema", pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_state(oid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_end() OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_drop() OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_state(oid) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_diff(jsonb, jsonb, jsonb, jsonb) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_using(jsonb, jsonb, text) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_generated(oid, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_defaults(oid, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_defaults(oid, jsonb) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_generated(oid, jsonb) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_relabel(oid, oid) SET search_path = pg_catalog, :"schema", pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_relabel(oid, oid) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_parts(oid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_parts(oid) OWNER TO :"owner";
ALTER FUNCTION :"schema".cdclake_ddl_partdiff(jsonb, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION :"schema".cdclake_ddl_partdiff(jsonb, jsonb) OWNER TO :"owner";

DROP EVENT TRIGGER IF EXISTS cdclake_ddl_end;
DROP EVENT TRIGGER IF EXISTS cdclake_ddl_drop;
CREATE EVENT TRIGGER cdclake_ddl_end ON ddl_command_end EXECUTE FUNCTION :"schema".cdclake_ddl_end();
CREATE EVENT TRIGGER cdclake_ddl_drop ON sql_drop EXECUTE FUNCTION :"schema".cdclake_ddl_drop();

-- Every table that exists now gets its starting state (the next command on it is compared with it).
INSERT INTO :"schema".cdclake_ddl (command_tag, object_identity, table_oid, schema_name, table_name, changes, columns,
                                   primary_key, partitions)
SELECT 'BASELINE', format('%I.%I', n.nspname, c.relname), c.oid, n.nspname, c.relname, '[]', s.cols, s.pk,
       :"schema".cdclake_ddl_parts(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  CROSS JOIN LATERAL :"schema".cdclake_ddl_state(c.oid) s
 WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't' AND n.nspname <> 'information_schema'
   AND n.nspname NOT LIKE 'pg\_%' AND c.oid <> to_regclass(format('%I.cdclake_ddl', :'schema'))
   AND NOT EXISTS (SELECT FROM :"schema".cdclake_ddl d WHERE d.table_oid = c.oid);

-- The connector's filtered publication takes the table at its next start; a running one needs it now.
SELECT format('ALTER PUBLICATION %I ADD TABLE %I.cdclake_ddl', :'publication', :'schema')
 WHERE EXISTS (SELECT FROM pg_publication WHERE pubname = :'publication')
   AND NOT EXISTS (SELECT FROM pg_publication_tables WHERE pubname = :'publication'
                   AND schemaname = :'schema' AND tablename = 'cdclake_ddl') \gexec
