"""The whole local pipeline for real: MariaDB -> Debezium on Kafka Connect -> Apache Kafka -> the Glue
job script (streaming, Spark's Kafka source) -> Iceberg, checked by reconciling source and lake (row
count + per-row checksum over all columns) after every step: changes, DDL, tables renamed, swapped,
dropped, without a key, every column type. Failures: test_pipeline_failures.py (a stack of its own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import stack_types as st
import type_matrix as tm
from pipeline_job import (
    job_log_shows,
    lake_columns,
    reconciled_table,
    start_job,
)
from stack_helpers import CUSTOMER_TOPIC, SQL, Stack, apply_sql, reconciled, run_script

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("job_is_running")]


def test_snapshot_reaches_the_lake_and_reconciles(job: Stack) -> None:
    events = job.events(CUSTOMER_TOPIC, lambda ev: len({e.key["cust_id"] for e in ev if e.op == "r"}) >= 30)
    assert len({e.key["cust_id"] for e in events if e.op == "r"}) == 30  # the init script's rows
    # Other tests of this module may have changed customer already (any order): the lake equals the source.
    out = reconciled(job)
    assert re.search(r"customer +source +(\d+) +lake +\1 +OK", out), out


def test_inserts_updates_deletes_reach_the_lake(job: Stack) -> None:
    apply_sql(job, SQL / "02_changes.sql")
    assert job.sql("SELECT COUNT(*) FROM customer WHERE cust_id IN (3, 32)").split()[-1] == "0"


def test_add_column_reaches_the_lake_with_the_default_for_existing_rows(job: Stack) -> None:
    out = apply_sql(job, SQL / "03_add_status_column.sql")
    assert "OK" in out  # the per-row checksum includes the new `status` column ('Green' for old rows)


def test_a_second_table_created_while_streaming_is_captured(job: Stack) -> None:
    out = apply_sql(job, SQL / "04_second_table.sql")
    assert "orders" in out and "OK" in out


def test_truncate_reaches_the_lake_with_inserts_in_the_same_and_in_a_later_batch(job: Stack) -> None:
    job.sql(
        "CREATE TABLE trunc_t (id INT PRIMARY KEY, note VARCHAR(20)); INSERT INTO trunc_t VALUES (1,'a'),(2,'b'),(3,'c')"
    )
    reconciled_table(job, "trunc_t", rows=3)
    # Same batch: the job is stopped until the truncate and the insert after it are both in Kafka.
    run_script(job, "local-job", "stop")
    job.sql("TRUNCATE TABLE trunc_t; INSERT INTO trunc_t VALUES (4, 'after truncate')")
    events = job.events("salesdb.salesdb.trunc_t", lambda ev: any(e.op == "c" and e.key == {"id": 4} for e in ev))
    truncate = [e for e in events if e.op == "t"]
    assert len(truncate) == 1 and truncate[0].offset < max(e.offset for e in events if e.op == "c")
    start_job(job)
    reconciled_table(job, "trunc_t", rows=1)
    job_log_shows(job, r"salesdb_trunc_t: 1 ev -> c/r 1 u 0 d 0 TRUNCATED")
    # Later batch: the truncate alone, then an insert.
    job.sql("TRUNCATE TABLE trunc_t")
    reconciled_table(job, "trunc_t", rows=0)
    job.sql("INSERT INTO trunc_t VALUES (5, 'later')")
    reconciled_table(job, "trunc_t", rows=1)


def test_decimal_scale_change_rewrites_the_lake_column_and_later_updates_reconcile(job: Stack) -> None:
    reconciled(job)  # the lake table exists with DECIMAL(12,2) (the job may have only just started)
    job.sql("ALTER TABLE customer MODIFY acct_balance DECIMAL(16,4) NOT NULL DEFAULT 0")
    job.sql("UPDATE customer SET acct_balance = acct_balance + 0.0001 WHERE cust_id IN (1, 2)")
    job.sql("UPDATE customer SET acct_balance = 123456789012.3456 WHERE cust_id = 4")
    reconciled(job)
    log = job_log_shows(job, re.escape("acct_balance decimal(12,2)->decimal(16,4) (rewritten)"))
    assert "incompatible schema change" not in log


def test_column_renames_reach_the_lake_as_renames_whichever_batch_brings_the_ddl(job: Stack) -> None:
    job.sql(
        "CREATE TABLE ren_t (id INT PRIMARY KEY, city VARCHAR(20), note VARCHAR(20));"
        "INSERT INTO ren_t VALUES (1,'Leeds','a'),(2,'Lyon','b'),(3,'Milan','c')"
    )
    reconciled_table(job, "ren_t", rows=3)
    # The job streaming: the statement and the next change usually arrive in different batches.
    job.sql("ALTER TABLE ren_t RENAME COLUMN city TO town; UPDATE ren_t SET town = 'Bath' WHERE id = 1")
    reconciled_table(job, "ren_t", rows=3)  # rows 2 and 3 were not updated: their values followed the rename
    assert lake_columns(job, "salesdb_ren_t") == ["id", "town", "note"]
    # The job stopped: the statement and the changes around it in one batch.
    run_script(job, "local-job", "stop")
    job.sql(
        "UPDATE ren_t SET note = 'before' WHERE id = 2;"
        "ALTER TABLE ren_t CHANGE COLUMN note remark VARCHAR(40) NULL;"
        "UPDATE ren_t SET remark = 'after' WHERE id = 3"
    )
    start_job(job)
    reconciled_table(job, "ren_t", rows=3)
    assert lake_columns(job, "salesdb_ren_t") == ["id", "town", "remark"]
    log = job_log_shows(job, re.escape("note->remark (renamed)"))
    assert "incompatible" not in log


def test_a_renamed_table_and_an_online_schema_change_swap_reconcile(job: Stack) -> None:
    job.sql(
        "CREATE TABLE ren_a (id INT PRIMARY KEY, v INT); INSERT INTO ren_a VALUES (1,1),(2,2);"
        "CREATE TABLE swap_t (id INT PRIMARY KEY, v INT); INSERT INTO swap_t VALUES (1,1),(2,2),(3,3)"
    )
    reconciled_table(job, "swap_t", rows=3)
    reconciled_table(job, "ren_a", rows=2)
    # A rename; then the copy-and-swap pt-online-schema-change runs to add a column.
    job.sql(
        "RENAME TABLE ren_a TO ren_b; INSERT INTO ren_b VALUES (3,3);"
        "CREATE TABLE _swap_t_new (id INT PRIMARY KEY, v INT, bin VARCHAR(4) DEFAULT 'A1');"
        "INSERT INTO _swap_t_new (id, v) SELECT id, v FROM swap_t;"
        "RENAME TABLE swap_t TO _swap_t_old, _swap_t_new TO swap_t; DROP TABLE _swap_t_old;"
        "UPDATE swap_t SET bin = 'Z9' WHERE id = 2"
    )
    out = reconciled(job)
    assert re.search(r"ren_b +source +3 +lake +3 +OK", out), out
    assert re.search(r"swap_t +source +3 +lake +3 +OK", out), out
    assert not re.search(r"\bren_a\b", out), out  # moved, not left behind


def test_tables_swapped_and_rotated_by_one_rename_table_each_reconcile(job: Stack) -> None:
    job.sql(
        "CREATE TABLE sw_a (id INT PRIMARY KEY, v VARCHAR(10)); CREATE TABLE sw_b (id INT PRIMARY KEY, v VARCHAR(10));"
        "CREATE TABLE sw_c (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO sw_a VALUES (1,'a1'),(2,'a2');"
        "INSERT INTO sw_b VALUES (1,'b1'); INSERT INTO sw_c VALUES (1,'c1'),(2,'c2'),(3,'c3')"
    )
    for table, rows in (("sw_a", 2), ("sw_b", 1), ("sw_c", 3)):
        reconciled_table(job, table, rows=rows)
    swap = "RENAME TABLE sw_a TO sw_tmp, sw_b TO sw_a, sw_tmp TO sw_b;"
    # A swap with changes around it, a three-table rotation, then the same swap twice; read in one
    # batch (the job stopped meanwhile): while streaming, the schema-change topic may be read a batch
    # after a table's (docs/COMPATIBILITY.md, Limitations).
    run_script(job, "local-job", "stop")
    job.sql(
        f"UPDATE sw_a SET v = 'a1+' WHERE id = 1; {swap} INSERT INTO sw_a VALUES (5, 'after');"
        "RENAME TABLE sw_a TO sw_tmp, sw_b TO sw_a, sw_c TO sw_b, sw_tmp TO sw_c;"
        f"{swap} {swap} UPDATE sw_b SET v = 'last' WHERE id = 1"
    )
    start_job(job)
    out = reconciled(job)
    for table, rows in (("sw_a", 2), ("sw_b", 3), ("sw_c", 2)):
        assert re.search(rf"{table} +source +{rows} +lake +{rows} +OK", out), out
    assert "sw_tmp" not in out, out


def test_a_column_dropped_and_added_again_or_renamed_onto_a_dropped_name_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE readd_t (id INT PRIMARY KEY, note VARCHAR(20), v INT, tag VARCHAR(10), memo VARCHAR(10));"
        "INSERT INTO readd_t VALUES (1,'a',1,'x','m1'),(2,'b',2,'y','m2'),(3,'c',3,'z','m3')"
    )
    reconciled_table(job, "readd_t", rows=3)
    run_script(job, "local-job", "stop")  # one batch, as above
    job.sql(
        # Another type; the same type with a default; another column renamed onto a dropped name.
        "ALTER TABLE readd_t DROP COLUMN note; ALTER TABLE readd_t ADD COLUMN note DECIMAL(6,1);"
        "UPDATE readd_t SET note = 12.5 WHERE id = 1;"
        "ALTER TABLE readd_t DROP COLUMN memo; ALTER TABLE readd_t ADD COLUMN memo VARCHAR(10) DEFAULT 'd';"
        "UPDATE readd_t SET memo = 'new' WHERE id = 2;"
        "ALTER TABLE readd_t DROP COLUMN tag; ALTER TABLE readd_t RENAME COLUMN v TO tag;"
        "UPDATE readd_t SET tag = 7 WHERE id = 3; INSERT INTO readd_t (id) VALUES (4);"
        # The same on a table created meanwhile: all of it in the table's first batch.
        "CREATE TABLE readd_new_t (id INT PRIMARY KEY, note VARCHAR(20), qty INT, extra VARCHAR(10));"
        "INSERT INTO readd_new_t VALUES (1,'one',1,'e1'),(2,'two',2,'e2');"
        "ALTER TABLE readd_new_t DROP COLUMN note; ALTER TABLE readd_new_t ADD COLUMN note DECIMAL(6,1);"
        "UPDATE readd_new_t SET note = 1.5 WHERE id = 1; INSERT INTO readd_new_t (id, qty, note) VALUES (3, 3, 4.5);"
        "ALTER TABLE readd_new_t DROP COLUMN qty, RENAME COLUMN extra TO qty; UPDATE readd_new_t SET qty = 'q2' WHERE id = 2"
    )
    start_job(job)
    reconciled_table(job, "readd_t", rows=4)
    reconciled_table(job, "readd_new_t", rows=3)
    assert st.dead_letters(job, "salesdb.salesdb.readd_t") == []
    assert st.dead_letters(job, "salesdb.salesdb.readd_new_t") == []
    assert lake_columns(job, "salesdb_readd_new_t") == ["id", "note__dropped", "qty__dropped", "qty", "note"]
    assert lake_columns(job, "salesdb_readd_t") == [
        "id", "note__dropped", "tag", "tag__dropped", "memo__dropped", "note", "memo"
    ]  # fmt: skip
    # Later changes keep following: the table did not stop.
    job.sql("UPDATE readd_t SET note = -1.5, memo = 'later' WHERE id = 4")
    reconciled_table(job, "readd_t", rows=4)


def test_columns_added_to_a_table_that_never_changes_again_reach_the_lake_with_their_defaults(job: Stack) -> None:
    job.sql(
        "CREATE TABLE quiet_add_t (id INT PRIMARY KEY, name VARCHAR(20));"
        "INSERT INTO quiet_add_t VALUES (1, 'a'), (2, 'b'), (3, 'c')"
    )
    reconciled_table(job, "quiet_add_t", rows=3)
    # No row event of the table follows: the statements alone bring the columns and their values.
    job.sql(
        "ALTER TABLE quiet_add_t ADD COLUMN tier VARCHAR(16) NOT NULL DEFAULT 'it''s gold',"
        " ADD COLUMN qty INT NOT NULL DEFAULT 7, ADD COLUMN since DATE NOT NULL DEFAULT '2024-01-01',"
        " ADD COLUMN at_dt DATETIME(3) DEFAULT '2024-01-02 03:04:05.250', ADD COLUMN price DECIMAL(10,2) DEFAULT 1.50,"
        " ADD COLUMN flag BOOLEAN NOT NULL DEFAULT TRUE, ADD COLUMN t TIME DEFAULT '01:02:03';"
        "ALTER TABLE quiet_add_t MODIFY COLUMN qty BIGINT NOT NULL DEFAULT 7;"
        "ALTER TABLE quiet_add_t ADD COLUMN gone INT DEFAULT 1; ALTER TABLE quiet_add_t DROP COLUMN gone;"
        "ALTER TABLE quiet_add_t ADD COLUMN gone VARCHAR(4) NOT NULL DEFAULT 'back';"
        "ALTER TABLE quiet_add_t ADD COLUMN lvl VARCHAR(8) DEFAULT 'one'; ALTER TABLE quiet_add_t RENAME COLUMN lvl TO level"
    )
    reconciled_table(job, "quiet_add_t", rows=3)
    assert st.dead_letters(job, "salesdb.salesdb.quiet_add_t") == []
    columns = lake_columns(job, "salesdb_quiet_add_t")
    assert columns[:9] == ["id", "name", "tier", "qty", "since", "at_dt", "price", "flag", "t"]
    assert columns[-2:] == ["gone", "level"]
    # The next change of the table finds the columns as it would have made them.
    job.sql("INSERT INTO quiet_add_t (id, name) VALUES (4, 'd'); UPDATE quiet_add_t SET tier = 'x' WHERE id = 1")
    reconciled_table(job, "quiet_add_t", rows=4)
    assert lake_columns(job, "salesdb_quiet_add_t") == columns


def test_apply_sql_takes_4_byte_characters_and_fails_with_the_error_when_a_statement_fails(
    job: Stack, tmp_path: Path
) -> None:
    emoji = tmp_path / "emoji.sql"
    emoji.write_text(
        "CREATE TABLE emoji_t (id INT PRIMARY KEY, note VARCHAR(20)) DEFAULT CHARSET = utf8mb4;\n"
        "INSERT INTO emoji_t VALUES (1, 'party \U0001f389');\n"
    )
    out = apply_sql(job, emoji)
    assert re.search(r"emoji_t +source +1 +lake +1 +OK", out), out
    # A column that cannot hold the character: the statement fails at the source, and so does the command.
    bad = tmp_path / "bad.sql"
    bad.write_text(
        "CREATE TABLE emoji3_t (id INT PRIMARY KEY, note VARCHAR(20)) DEFAULT CHARSET = utf8mb3;\n"
        "INSERT INTO emoji3_t VALUES (1, '\U0001f389');\nINSERT INTO emoji3_t VALUES (2, 'never run');\n"
    )
    res = run_script(job, "apply-sql", str(bad), "--wait", "5")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Incorrect string value" in res.stderr and "a statement failed at the source" in res.stderr, res.stderr
    assert "MATCH" not in res.stdout
    assert job.sql("SELECT COUNT(*) FROM emoji3_t").split()[-1] == "0"


def test_a_dropped_table_is_kept_marked_and_its_recreation_reconciles(job: Stack) -> None:
    job.sql("CREATE TABLE drop_t (id INT PRIMARY KEY, v INT); INSERT INTO drop_t VALUES (1,1),(2,2)")
    reconciled_table(job, "drop_t", rows=2)
    job.sql("DROP TABLE drop_t")
    out = reconciled(job)
    assert re.search(r"drop_t +source +0 +lake +2 +OK \(dropped at the source at \S+; lake table kept", out), out
    job.sql("CREATE TABLE drop_t (id INT PRIMARY KEY, v INT); INSERT INTO drop_t VALUES (3,3)")
    reconciled_table(job, "drop_t", rows=1)


def test_a_table_without_a_primary_key_keeps_its_duplicates_and_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE keyless_t (a INT, b VARCHAR(10));INSERT INTO keyless_t VALUES (1,'x'),(1,'x'),(1,'x'),(2,'y');"
    )
    out = reconciled(job)
    assert re.search(r"keyless_t +source +4 +lake +4 +OK \(no key", out), out
    job.sql("UPDATE keyless_t SET b = 'z' WHERE a = 1 LIMIT 1; DELETE FROM keyless_t WHERE a = 1 LIMIT 1")
    reconciled_table(job, "keyless_t", rows=3)
    job.sql("DELETE FROM keyless_t WHERE a = 2; INSERT INTO keyless_t VALUES (1,'x')")
    reconciled_table(job, "keyless_t", rows=3)


def test_a_primary_key_added_then_changed_by_alter_table_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE rekey_t (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT);"
        "INSERT INTO rekey_t VALUES (1,'x',1),(2,'y',2),(3,'z',3);"
        "ALTER TABLE rekey_t ADD PRIMARY KEY (a);"
        "UPDATE rekey_t SET c = 10 WHERE a = 1; DELETE FROM rekey_t WHERE a = 2;"
    )
    reconciled_table(job, "rekey_t", rows=2)
    job.sql(
        "ALTER TABLE rekey_t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b);"
        "INSERT INTO rekey_t VALUES (1,'w',5); UPDATE rekey_t SET c = 11 WHERE a = 1 AND b = 'x';"
    )
    reconciled_table(job, "rekey_t", rows=3)
    assert st.dead_letters(job, "salesdb.salesdb.rekey_t") == []


def test_partitions_dropped_or_truncated_at_the_source_leave_the_lake(job: Stack) -> None:
    job.sql(
        "CREATE TABLE part_t (id INT NOT NULL PRIMARY KEY, note VARCHAR(10)) PARTITION BY RANGE (id) (PARTITION p0 "
        "VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), PARTITION pmax VALUES LESS THAN MAXVALUE);"
        "INSERT INTO part_t VALUES (1,'a'),(5,'b'),(12,'c'),(15,'d'),(25,'e'),(40,'f');"
        "CREATE TABLE hash_t (id INT NOT NULL PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2;"
        "INSERT INTO hash_t VALUES (1),(2)"
    )
    reconciled_table(job, "part_t", rows=6)
    reconciled_table(job, "hash_t", rows=2)
    try:
        # The binlog has the statements only; after DROP PARTITION p0, p1 holds every id below 20.
        job.sql(
            "ALTER TABLE part_t TRUNCATE PARTITION p1; ALTER TABLE part_t DROP PARTITION p0;"
            "INSERT INTO part_t VALUES (3, 'in p1');"
            "ALTER TABLE part_t REORGANIZE PARTITION pmax INTO (PARTITION p2 VALUES LESS THAN (30),"
            " PARTITION pmax VALUES LESS THAN MAXVALUE); ALTER TABLE part_t TRUNCATE PARTITION p2"
        )
        reconciled_table(job, "part_t", rows=2)
        job.sql("ALTER TABLE part_t DROP PARTITION p1")
        reconciled_table(job, "part_t", rows=1)
        # Which rows HASH partition p0 held is not known: the table is marked, loudly, nothing deleted.
        job.sql("ALTER TABLE hash_t TRUNCATE PARTITION p0; INSERT INTO hash_t VALUES (3)")
        job_log_shows(
            job,
            r"source table of \S+salesdb_hash_t no longer equals the lake: .*TRUNCATE PARTITION p0.*new Debezium snapshot",
        )
        job_log_shows(job, r"salesdb_hash_t: 1 ev -> c/r 1 .*NOT-EQUAL-TO-SOURCE\[TRUNCATE PARTITION p0")
        assert job.sql("SELECT COUNT(*) FROM hash_t").split()[-1] == "2"
    finally:
        # The module's later whole-database reconciles: a dropped table's lake table is kept, marked.
        job.sql("DROP TABLE IF EXISTS hash_t")


def test_set_and_enum_columns_redefined_reconcile(job: Stack) -> None:
    job.sql(
        "CREATE TABLE set_t (id INT PRIMARY KEY, tags SET('a','b','c'), grade ENUM('a','b','c'));"
        "INSERT INTO set_t VALUES (1,'a,b','a'),(2,'b,c','b'),(3,NULL,NULL),(4,'','c')"
    )
    reconciled_table(job, "set_t", rows=4)
    # MariaDB shows every stored value in the new order, without a row event; ALTER converts ENUM
    # values by text: 'a' takes the spelling 'A'; 'c', no longer a member, is '' (a non-strict sql_mode).
    job.sql("SET SESSION sql_mode = ''; ALTER TABLE set_t MODIFY tags SET('c','b','a'), MODIFY grade ENUM('A','b')")
    assert job.sql("SELECT GROUP_CONCAT(id, '=', tags, '=', grade ORDER BY id) FROM set_t").split()[-1] == (
        "1=b,a=A,2=c,b=b,4=="
    )
    reconciled_table(job, "set_t", rows=4)
    job.sql("INSERT INTO set_t VALUES (5, 'a,c', 'b'); ALTER TABLE set_t MODIFY tags SET('a','b','c','d')")
    reconciled_table(job, "set_t", rows=5)


def test_defaults_changed_after_an_add_column_and_a_character_set_conversion_reconcile(job: Stack) -> None:
    def both(defaults: int, converted: int) -> None:
        out = reconciled(job, "--table", "dflt_t", "--table", "cs_t")
        assert re.search(rf"dflt_t +source +{defaults} +lake +{defaults} +OK", out), out
        assert re.search(rf"cs_t +source +{converted} +lake +{converted} +OK", out), out

    job.sql(
        "SET NAMES utf8mb4; CREATE TABLE dflt_t (id INT PRIMARY KEY, v INT); INSERT INTO dflt_t VALUES (1,1),(2,2);"
        "CREATE TABLE cs_t (id INT PRIMARY KEY, v VARCHAR(20), w TEXT) DEFAULT CHARSET=utf8mb4;"
        "INSERT INTO cs_t VALUES (1,'café','Ünïcode'),(2,'€ 5','x')"
    )
    both(2, 2)
    # The job stopped: the statements in one batch, and no row event of dflt_t after them. The
    # existing rows keep the ADD COLUMN's default ('gold', 'n1', 'a') at the source.
    run_script(job, "local-job", "stop")
    job.sql(
        "ALTER TABLE dflt_t ADD COLUMN tier VARCHAR(10) NOT NULL DEFAULT 'gold';"
        "ALTER TABLE dflt_t ALTER COLUMN tier SET DEFAULT 'silver';"
        "ALTER TABLE dflt_t ADD COLUMN note VARCHAR(10) DEFAULT 'n1', ADD COLUMN grade VARCHAR(10) DEFAULT 'a';"
        "ALTER TABLE dflt_t ALTER COLUMN note DROP DEFAULT, RENAME COLUMN grade TO level;"
        "ALTER TABLE dflt_t MODIFY level VARCHAR(10) DEFAULT 'b';"
        "ALTER TABLE cs_t CONVERT TO CHARACTER SET latin1"
    )
    start_job(job)
    both(2, 2)
    job.sql(
        "SET NAMES utf8mb4; INSERT INTO dflt_t (id, v) VALUES (3,3); INSERT INTO cs_t VALUES (3,'naïve','ü');"
        "ALTER TABLE cs_t CONVERT TO CHARACTER SET utf8mb4; INSERT INTO cs_t VALUES (4,'😀','ok')"
    )
    assert job.sql("SELECT CONCAT_WS(',', tier, note, level) FROM dflt_t WHERE id = 3").split()[-1] == "silver,b"
    both(3, 4)


def test_every_mariadb_column_type_reaches_the_lake_with_the_exact_value(job: Stack) -> None:
    topic = f"salesdb.salesdb.{tm.TABLE}"
    try:
        job.sql(tm.MARIADB_SETUP + tm.MARIADB_CHANGES)
        diff = st.wait_until_equal(job, "mariadb", f"salesdb_{tm.TABLE}")
        assert diff == [], "\n".join(diff)
        assert st.dead_letters(job, topic) == []
        messages = st.raw_messages(job, topic, lambda ms: any(m["value"] is None for m in ms))
        st.capture("mariadb", messages, st.source_rows(job, "mariadb"))
        # The oracle users run agrees on every type; YEAR 0000 stays 0 (the binlog reader's 1900), and
        # years below 100 stay as they are (not read as two-digit years).
        reconciled(job, "--table", tm.TABLE, wait=60)
        job.sql(
            "CREATE TABLE year_t (id INT PRIMARY KEY, y YEAR, d DATE, t DATETIME);"
            "INSERT INTO year_t VALUES (1, 0, '0050-06-01', '0069-12-31 23:59:59'), (2, 1901, '0070-01-01', NULL), (3, 2155, NULL, NULL)"
        )
        reconciled(job, "--table", "year_t", wait=60)
    finally:
        # The module's later whole-database reconciles compare the customer tables only.
        job.sql(f"DROP TABLE IF EXISTS {tm.TABLE}, year_t")
