"""The persistent local session catalog (CDC_SESSION_METASTORE): Spark's Hive metastore client over
Derby for Delta and Hudi, nothing for Iceberg, whose catalog is `--catalog_name`'s own."""

from __future__ import annotations

import pytest
from cdclake.common.settings import build_settings
from cdclake.local.session import JVM_OPTIONS_ENV, SESSION_METASTORE_ENV, driver_java_options, session_metastore_conf


def settings(table_format: str):
    return build_settings(
        {"source": "files", "files_path": "/in", "warehouse": "/w", "checkpoint_location": "/c"}
        | {"dead_letter_path": "/d", "table_format": table_format}
    )


@pytest.mark.parametrize("table_format", ["delta", "hudi"])
def test_the_session_metastore_folder_makes_the_session_catalog_a_derby_backed_hive_metastore(table_format):
    s = settings(table_format)
    conf = session_metastore_conf(s, {SESSION_METASTORE_ENV: "/tmp/ms"})
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert (
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
        == "jdbc:derby:;databaseName=/tmp/ms/metastore_db;create=true"
    )
    # Like the Glue Data Catalog, it takes the column types a format's ALTER TABLE writes (Hive's own
    # check refused a Hudi ADD COLUMN and stopped `make demo TABLE_FORMAT=hudi`).
    assert conf["spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes"] == "false"
    # Derby's log goes beside its database, after the suite's own JVM flags.
    env = {SESSION_METASTORE_ENV: "/tmp/ms", JVM_OPTIONS_ENV: "-XX:TieredStopAtLevel=1"}
    assert driver_java_options(s, env) == "-XX:TieredStopAtLevel=1 -Dderby.system.home=/tmp/ms"


def test_without_the_folder_or_with_iceberg_the_session_catalog_is_left_as_it_is():
    assert session_metastore_conf(settings("delta"), {}) == {}
    assert session_metastore_conf(settings("iceberg"), {SESSION_METASTORE_ENV: "/tmp/ms"}) == {}
    assert driver_java_options(settings("iceberg"), {SESSION_METASTORE_ENV: "/tmp/ms"}) == ""
