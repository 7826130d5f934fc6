"""build-artifacts: everything `deploy` uploads, built offline into build/.

  build/cloudformation/cdc-pipeline.yaml   rendered template (connector config, worker config, queries)
  build/cloudformation/bootstrap.yaml      artifacts-bucket stack
  build/cloudformation/lambda/*.zip        custom-resource code (uploaded by `cloudformation package`); the
                                           schema-history function's wheels come from PyPI (cached in .local)
  build/artifacts/*                        plugin zips (Debezium 3.x and the Java 11 build), the Glue job's extra jar, cdclake.zip, job scripts, seed SQL
  build/artifacts.json                     manifest: local path, content-hash S3 key, sha256, parameters

S3 keys carry the content hash, so an unchanged artifact keeps its key and a redeploy changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from cdctools import cli

from cdcdeploy import artifacts, templates

ROOT = templates.ROOT
BUILD_DIR = ROOT / "build"
JOB_SCRIPT = ROOT / "glue_scripts" / "cdc_lake_job.py"
MAINTENANCE_SCRIPT = ROOT / "glue_scripts" / "cdc_maintenance_job.py"
CDCLAKE_DIR = ROOT / "glue_scripts" / "cdclake"
SEED_SQL_DIR = ROOT / "sql"
LAMBDA_SRC = templates.CFN_DIR / "lambda" / "bootstrap_brokers"
LAMBDA_ZIP = "lambda/bootstrap-brokers.zip"  # the path the template's Code names, next to the template
HISTORY_LAMBDA_SRC = templates.CFN_DIR / "lambda" / "schema_history_topic"
HISTORY_LAMBDA_ZIP = "lambda/schema-history-topic.zip"


@dataclass(frozen=True)
class Artifact:
    path: str
    key: str
    sha256: str


def build_templates(out_dir: Path) -> dict[str, Path]:
    """Rendered templates plus the Lambda zips they reference (enough for cfn-lint, checkov, package)."""
    paths = templates.write_templates(out_dir)
    artifacts.build_lambda_zip(out_dir / LAMBDA_ZIP, LAMBDA_SRC)
    artifacts.build_lambda_zip(out_dir / HISTORY_LAMBDA_ZIP, HISTORY_LAMBDA_SRC)
    return paths


def seed_sql_files(sql_dir: Path) -> list[Path]:
    """sql/*.sql, then sql/postgres/*.sql (the PostgreSQL client loads those), each in load order;
    not sql/athena/."""
    top = sorted(p for p in sql_dir.glob("*.sql") if p.is_file())
    return top + sorted(p for p in (sql_dir / "postgres").glob("*.sql") if p.is_file())


def glue_extra_jar_artifact(art_dir: Path, profile: str = artifacts.GLUE_EXTRA_JARS_PROFILE) -> Artifact:
    """The jar of one of the manifest's profiles the job gets with --extra-jars (glue-extra-jars: the MSK
    IAM client; glue-avro-jars: spark-avro), copied into art_dir under a content-hash key. The template
    names one jar per profile (GlueExtraJarKey, GlueAvroJarKey): each profile resolves to that jar alone
    (its dependencies are Glue's own), and anything else stops the build here."""
    jars = artifacts.profile_jars(profile)
    if len(jars) != 1:
        names = ", ".join(j.name for j in jars)
        raise ValueError(
            f"profile {profile} resolved to {len(jars)} jars ({names}); the template's "
            "--extra-jars takes exactly one of it (GlueExtraJarKey, GlueAvroJarKey)"
        )
    dst = art_dir / "glue-jars" / jars[0].name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(jars[0], dst)
    sha = artifacts.sha256_file(dst)
    return Artifact(str(dst), f"glue-jars/{sha[:12]}/{dst.name}", sha)


def _copied(src: Path, art_dir: Path) -> tuple[Path, str]:
    """`src` copied into art_dir, and the copy's SHA-256."""
    dst = art_dir / src.name
    shutil.copyfile(src, dst)
    return dst, artifacts.sha256_file(dst)


def seed_sql_artifacts(sql_dir: Path, sql_dst: Path) -> tuple[str, list[Artifact]]:
    """The seed SQL files copied into sql_dst, under one prefix that hashes their names and content."""
    sql_files = seed_sql_files(sql_dir)
    sql_hash = hashlib.sha256()
    names = {f: f.relative_to(sql_dir).as_posix() for f in sql_files}  # postgres/01_... keeps its folder
    for f in sql_files:
        sql_hash.update(names[f].encode() + b"\0" + f.read_bytes() + b"\0")
    sql_prefix = f"sql/{sql_hash.hexdigest()[:12]}"
    sql_dst.mkdir()
    items = []
    for f in sql_files:
        dst = sql_dst / names[f]
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
        items.append(Artifact(str(dst), f"{sql_prefix}/{names[f]}", artifacts.sha256_file(dst)))
    return sql_prefix, items


def plugin_artifacts(art_dir: Path, engine: str, plugin_zip: Path | None) -> tuple[list[Artifact], dict[str, str]]:
    """The engine's two connector plugins, Debezium 3.x (or `plugin_zip`) and the Java 11 build the
    template's DebeziumBuild=java11 selects, and their template parameters (key and content hash each)."""
    current = (
        artifacts.Built(plugin_zip, artifacts.sha256_file(plugin_zip))
        if plugin_zip
        else artifacts.build_plugin_zip(art_dir / f"debezium-{engine}-plugin.zip", engine)
    )
    java11 = artifacts.build_plugin_zip(art_dir / f"debezium-{engine}-java11-plugin.zip", engine, "java11")
    items, params = [], {}
    for built, name, infix in ((current, "DebeziumPlugin", ""), (java11, "DebeziumJava11Plugin", "-java11")):
        items.append(
            Artifact(str(built.path), f"plugins/debezium-{engine}{infix}-{built.short_hash}.zip", built.sha256)
        )
        params |= {f"{name}Key": items[-1].key, f"{name}Hash": built.short_hash}
    return items, params


def build_artifacts(
    out_dir: Path,
    job_script: Path = JOB_SCRIPT,
    cdclake_dir: Path = CDCLAKE_DIR,
    sql_dir: Path = SEED_SQL_DIR,
    plugin_zip: Path | None = None,
    source_engine: str = "mysql",
    maintenance_script: Path = MAINTENANCE_SCRIPT,
) -> dict[str, object]:
    """Build every uploadable artifact into out_dir/artifacts and return the manifest.

    source_engine (the template's SourceEngine) picks the connector plugin: MySQL or PostgreSQL."""
    art_dir = out_dir / "artifacts"
    if art_dir.exists():
        shutil.rmtree(art_dir)
    art_dir.mkdir(parents=True)
    for script_path in (job_script, maintenance_script):
        if not script_path.is_file():
            raise FileNotFoundError(f"Glue job script {script_path} not found")

    plugins, plugin_params = plugin_artifacts(art_dir, source_engine, plugin_zip)
    cdclake = artifacts.build_cdclake_zip(art_dir / "cdclake.zip", cdclake_dir)
    script, script_sha = _copied(job_script, art_dir)
    maintenance, maintenance_sha = _copied(maintenance_script, art_dir)
    # The scripts and their package travel together: one hash over all names one version of the jobs.
    job_hash = hashlib.sha256((script_sha + cdclake.sha256 + maintenance_sha).encode()).hexdigest()[:12]

    items = [
        *plugins,
        Artifact(str(script), f"glue/{job_hash}/{job_script.name}", script_sha),
        Artifact(str(cdclake.path), f"glue/{job_hash}/cdclake.zip", cdclake.sha256),
        Artifact(str(maintenance), f"glue/{job_hash}/{maintenance_script.name}", maintenance_sha),
        glue_extra_jar_artifact(art_dir),
        glue_extra_jar_artifact(art_dir, artifacts.GLUE_AVRO_JARS_PROFILE),
        glue_extra_jar_artifact(art_dir, artifacts.GLUE5_AVRO_JARS_PROFILE),
    ]
    sql_prefix, sql_items = seed_sql_artifacts(sql_dir, art_dir / "sql")
    items += sql_items

    manifest: dict[str, object] = {
        "artifacts": [asdict(a) for a in items],
        "parameters": {
            **plugin_params,
            "GlueScriptKey": items[2].key,
            "CdclakeZipKey": items[3].key,
            "MaintenanceScriptKey": items[4].key,
            "GlueExtraJarKey": items[5].key,
            "GlueAvroJarKey": items[6].key,
            "GlueAvro5JarKey": items[7].key,
            "SeedSqlPrefix": sql_prefix,
        },
        "seed_sql_files": [a.key.removeprefix(f"{sql_prefix}/") for a in sql_items],
    }
    (out_dir / "artifacts.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="build-artifacts", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=BUILD_DIR, help="output directory (default build/)")
    parser.add_argument(
        "--templates-only", action="store_true", help="render the templates and the Lambda zips only (for linting)"
    )
    parser.add_argument(
        "--plugin-zip",
        type=Path,
        help="use this connector plugin zip instead of building one from the manifest (pom.xml)",
    )
    parser.add_argument(
        "--source-engine",
        choices=sorted(artifacts.PLUGINS),
        default="mysql",
        help="the template's SourceEngine: which connector plugin to build (default mysql)",
    )
    args = parser.parse_args(argv)
    paths = build_templates(args.out / "cloudformation")
    print(f"[build] templates: {', '.join(str(p) for p in paths.values())}")
    if args.templates_only:
        return 0
    manifest = build_artifacts(args.out, plugin_zip=args.plugin_zip, source_engine=args.source_engine)
    for a in manifest["artifacts"]:  # type: ignore[union-attr]
        print(f"[build] {a['key']}  <-  {a['path']}")
    if not manifest["seed_sql_files"]:
        print("[build] WARNING: no sql/*.sql seed files: the client instance will load no data", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
