"""scripts/cdcstack/: every source engine module provides the whole SourceEngine interface, with
the same parameters, so that the stack can call whichever --source chose; and the broker's cluster
id has the format of Kafka's own `kafka-storage random-uuid`."""

from __future__ import annotations

import base64
import inspect
import re
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from cdcstack import kafka, plumbing, sources  # noqa: E402

FUNCTIONS = {n: f for n, f in vars(plumbing.SourceEngine).items() if inspect.isfunction(f) and not n.startswith("_")}
CONSTANTS = set(plumbing.SourceEngine.__annotations__)


@pytest.mark.parametrize("source", sorted(sources.ENGINES))
def test_each_engine_defines_every_name_of_the_source_engine_interface(source: str) -> None:
    engine = sources.ENGINES[source]
    assert FUNCTIONS and CONSTANTS
    missing = sorted(n for n in [*FUNCTIONS, *CONSTANTS] if not hasattr(engine, n))
    assert not missing, f"{engine.__name__} lacks {missing}"
    for name, declared in FUNCTIONS.items():
        expected = [p for p in inspect.signature(declared).parameters if p != "self"]
        assert list(inspect.signature(getattr(engine, name)).parameters) == expected, f"{engine.__name__}.{name}"


def test_the_engines_have_their_own_component_port_connector_and_plugin() -> None:
    engines = list(sources.ENGINES.values())
    for attribute in ("COMPONENT", "PORT_ENV", "DEFAULT_PORT", "CONNECTOR", "PLUGIN", "TEMPLATE"):
        values = [getattr(e, attribute) for e in engines]
        assert len(set(values)) == len(values), attribute
    assert {e.COMPONENT for e in engines}.isdisjoint({"kafka", "connect", "job"})
    for e in engines:
        assert sources.of_component(e.COMPONENT) is e
    assert sources.of_component("kafka") is None


def test_each_engine_has_the_demo_scenario_in_its_own_dialect() -> None:
    files = ["01_create_customer.sql", "02_changes.sql", "03_add_status_column.sql", "04_second_table.sql"]
    scenarios = {e.SCENARIO for e in sources.ENGINES.values()}
    assert len(scenarios) == len(sources.ENGINES)
    for folder in scenarios:
        assert sorted(p.name for p in folder.glob("0*.sql")) == files, folder


def test_the_settings_carry_the_engine_the_source_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    for source, engine in sources.ENGINES.items():
        s = sources.stack_config(source)
        assert s.engine is engine and s.components == (engine.COMPONENT, "kafka", "connect")
        assert s.connector == engine.CONNECTOR and s.ports[engine.COMPONENT] == engine.DEFAULT_PORT
    with pytest.raises(plumbing.StackError, match="choose one of mysql, postgres"):
        sources.stack_config("oracle")


def test_the_kafka_cluster_id_has_the_format_of_kafka_storage_random_uuid() -> None:
    # 2,000 draws: an id starting with "-" (1 in 64) would be among them if it were not drawn again.
    ids = {kafka.new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    for cluster_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id) and not cluster_id.startswith("-"), cluster_id
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(cluster_id + "==")).version == 4


def test_a_failed_start_shows_the_notes_before_the_first_error_and_the_end_of_the_log(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from cdcstack.plumbing import log_tail

    log = tmp_path / "mariadb.log"
    help_text = [f"help line {i}" for i in range(30)]  # what mariadb-install-db prints after failing
    before = ["old run [ERROR] not this one", "===== start", "[Note] starting", "[Note] io_uring failed: the reason"]
    log.write_text("\n".join([*before, "[ERROR] Aborting", *help_text]))
    shown = log_tail(SimpleNamespace(log=lambda component: log), "mariadb")  # type: ignore[arg-type]
    assert "io_uring failed: the reason" in shown and "[ERROR] Aborting" in shown
    assert "help line 29" in shown and "not this one" not in shown


def test_down_stops_the_local_job_with_the_stack_and_not_with_one_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdcstack import commands

    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    s = sources.stack_config("mysql")
    s.log(plumbing.JOB).parent.mkdir(parents=True, exist_ok=True)
    s.record(plumbing.JOB).parent.mkdir(parents=True, exist_ok=True)
    proc = plumbing.launch(s, plumbing.JOB, ["sleep", "300"], port=0)
    try:
        assert commands.cmd_down(s, ["kafka"]) == 0
        assert plumbing.live_record(s, plumbing.JOB) is not None, "stopping one component leaves the job"
        assert commands.cmd_down(s, []) == 0
        assert proc.wait(timeout=10) is not None
        assert plumbing.live_record(s, plumbing.JOB) is None
    finally:
        proc.kill()


def test_the_avro_wire_format_adds_the_registry_before_connect_and_its_converters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdcstack import commands

    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    json_stack, avro_stack = sources.stack_config("mysql"), sources.stack_config("mysql", "avro")
    assert json_stack.wire_format == "json" and "registry" not in json_stack.components
    assert avro_stack.components == ("mariadb", "kafka", "registry", "connect")
    config = commands.connector_config(avro_stack, 3307, 19092)
    endpoint = f"http://127.0.0.1:{avro_stack.ports['registry']}"
    assert config["value.converter.endpoint"] == config["key.converter.endpoint"] == endpoint
    assert config["value.converter.registry.name"] == "cdc-lake"
    assert config["database.hostname"] == commands.connector_config(json_stack, 3307, 19092)["database.hostname"]
    monkeypatch.setenv("CDC_STACK_FORMAT", "protobuf")
    with pytest.raises(plumbing.StackError, match="choose one of json, avro"):
        sources.stack_config("mysql")


@pytest.mark.parametrize("table_format", ["delta", "hudi"])
def test_make_demo_table_format_reaches_the_local_jobs_settings(
    table_format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make demo TABLE_FORMAT=x -> demo --table-format x -> the local job's command line, which
    # the job's own argument parsing turns into its settings.
    import subprocess

    from cdclake.common.settings import build_settings, parse_argv
    from cdctools import local_job

    recipe = subprocess.run(
        ["make", "-n", "demo", f"TABLE_FORMAT={table_format}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert re.search(rf"demo\s.*--table-format {table_format}\b", recipe), recipe
    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    command = local_job.job_command(sources.stack_config("mysql", "json"), [], table_format)
    assert command[1] == str(local_job.SCRIPT)
    settings = build_settings(parse_argv(command[2:]))
    assert settings.table_format == table_format and settings.source == "kafka"


def test_make_demo_write_mode_merge_on_read_gives_the_local_hudi_job_merge_on_read_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.lake.formats import table_format
    from cdctools import demo, local_job

    recipe = subprocess.run(
        ["make", "-n", "demo", "TABLE_FORMAT=hudi", "WRITE_MODE=merge-on-read"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"demo\s.*--table-format hudi --write-mode merge-on-read\b", recipe), recipe
    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    s = sources.stack_config("mysql", "json")
    command = local_job.job_command(s, demo.job_arguments("merge-on-read"), "hudi")
    settings = build_settings(parse_argv(command[2:]))
    assert settings.write_mode == "merge-on-read"
    assert table_format(settings).table_properties(settings.write_mode)["type"] == "mor"
    # Without it, Hudi's default: copy-on-write.
    assert build_settings(parse_argv(local_job.job_command(s, demo.job_arguments(None), "hudi")[2:])).write_mode == (
        "copy-on-write"
    )


def test_a_local_delta_or_hudi_job_keeps_its_catalog_in_the_stacks_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job started again must find the tables the one before created: the session catalog goes to a
    # folder of the stack's state, under the name the job's session reads.
    from cdclake.local.session import SESSION_METASTORE_ENV
    from cdctools import local_job

    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    s = sources.stack_config("mysql", "json")
    env = local_job.session_catalog_env(s)
    assert list(env) == [SESSION_METASTORE_ENV]
    assert Path(env[SESSION_METASTORE_ENV]).parent == tmp_path


@pytest.mark.parametrize("table_format", ["iceberg", "delta", "hudi"])
def test_a_local_resume_run_writes_the_streams_lake_and_reads_its_marks_with_a_checkpoint_of_its_own(
    table_format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # local-job resume TABLE: the job once over the table's set-aside folder (found by its mark
    # under the stream's --dead_letter_path), a new checkpoint each run (a retry reads every file again).
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.job import check_input_exists
    from cdctools import local_job

    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    s = sources.stack_config("mysql", "json")
    stream = build_settings(parse_argv(local_job.job_command(s, [], table_format)[2:]))
    runs = [
        build_settings(parse_argv(local_job.resume_command(s, "salesdb_orders", table_format, t)[2:])) for t in "12"
    ]
    for run in runs:
        check_input_exists(run)
        assert (run.source, run.run_once, run.resume_table, run.files_path) == ("files", True, "salesdb_orders", "")
        assert (run.warehouse, run.dead_letter_path, run.table_format) == (
            stream.warehouse,
            stream.dead_letter_path,
            stream.table_format,
        )
    checkpoints = {stream.checkpoint_location, *(r.checkpoint_location for r in runs)}
    assert len(checkpoints) == 3


def test_free_ports_handed_to_one_process_all_differ() -> None:
    # The OS may pick a just-closed port again: a stack given the same port twice does not start.
    ports = [plumbing.free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)


def test_make_demo_debezium_java11_gives_kafka_connect_the_java_11_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make demo DEBEZIUM=java11 -> demo --debezium java11 -> CDC_STACK_DEBEZIUM -> the worker's plugin.path.
    import subprocess

    from cdcstack import connect
    from cdctools import pinned_jars as runtime

    recipe = subprocess.run(
        ["make", "-n", "demo", "DEBEZIUM=java11"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"demo\s.*--debezium java11\b", recipe), recipe
    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    assert sources.stack_config("mysql").debezium_build == "java17"
    monkeypatch.setenv("CDC_STACK_DEBEZIUM", "java11")
    plugin_path = connect.assemble_plugins(sources.stack_config("mysql"))
    for engine in ("mysql", "postgres"):
        jars = {j.name for j in (plugin_path / f"debezium-connector-{engine}").iterdir()}
        version = runtime.versions()[f"debezium-{engine}-java11"]
        assert f"debezium-connector-{engine}-{version}.jar" in jars and runtime.CONVERTER_MANIFEST_JAR in jars
        assert version.startswith("2.7.")
    monkeypatch.setenv("CDC_STACK_DEBEZIUM", "java8")
    with pytest.raises(plumbing.StackError, match="choose one of java17, java11"):
        sources.stack_config("mysql")
