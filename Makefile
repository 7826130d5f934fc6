# Two commands do all the set-up: `make demo` and `make test` (see README.md). Deploying to AWS
# needs only `make setup-deploy` (no database servers, no sudo).
SHELL := /bin/bash
VENV  := .local/venv
PY    := $(VENV)/bin/python
# The tools' commands (pyproject.toml), installed by make setup.
BIN   := $(VENV)/bin
# Three pytest workers, also on two cores: most of the suite waits on a stack, Spark or a subprocess,
# not on the CPU.
# Tests that share a stack or a module fixture stay in one worker (tests/conftest.py).
TEST_WORKERS ?= 3
XDIST := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.PHONY: setup setup-deploy test test-unit test-job test-stack lint lint-cfn format demo clean

setup:            ## the local stack and the tests: venv, Java, jars, MariaDB + PostgreSQL (apt, sudo)
	@scripts/setup-local
	@scripts/setup-stack

setup-deploy:     ## deploying only: aws CLI, boto3, cfn-lint, checkov, ruff, the shipped jars (no sudo, no databases)
	@scripts/setup-deploy

lint: setup lint-cfn  ## ruff (+ lint-cfn)
	@$(VENV)/bin/ruff check glue_scripts tests scripts
	@$(VENV)/bin/ruff format --check glue_scripts tests

format: setup
	@$(VENV)/bin/ruff format glue_scripts tests
	@$(VENV)/bin/ruff check --fix glue_scripts tests

lint-cfn: setup-deploy ## CloudFormation: render, cfn-lint + project rules, checkov, ruff on the deploy code
	@$(BIN)/build-artifacts --templates-only >/dev/null
	@$(VENV)/bin/cfn-lint build/cloudformation/*.yaml --append-rules cloudformation/lint_rules
	@$(VENV)/bin/checkov -d build/cloudformation --framework cloudformation --compact --quiet --skip-download
	@$(VENV)/bin/ruff check cloudformation
	@$(VENV)/bin/ruff format --check cloudformation scripts/cdcdeploy

test: setup lint  ## every test, with the 15 slowest listed
	@$(PY) -m pytest $(XDIST) --durations=15 $(PYTEST_ARGS)

test-unit: setup  ## pure tests, no Spark: tests/unit + tests/scripts
	@$(PY) -m pytest tests/unit tests/scripts $(PYTEST_ARGS)

test-job: setup   ## real Spark + Iceberg: tests/job, and tests/glue_catalog (the Glue catalog + S3 on moto)
	@$(PY) -m pytest $(XDIST) --durations=15 tests/job tests/glue_catalog $(PYTEST_ARGS)

test-stack: setup ## the real local pipeline: tests/stack
	@$(PY) -m pytest $(XDIST) --durations=15 tests/stack $(PYTEST_ARGS)

demo: setup       ## the seed walkthrough on the real local pipeline (KEEP=1 leaves it running, SOURCE=postgres, FORMAT=json, TABLE_FORMAT=delta|hudi, WRITE_MODE=merge-on-read|copy-on-write, DEBEZIUM=java11, TRANSACTIONS=keep, CAPTURE=query)
	@$(BIN)/demo $(if $(KEEP),--keep,) $(if $(SOURCE),--source $(SOURCE),) $(if $(FORMAT),--format $(FORMAT),) $(if $(TABLE_FORMAT),--table-format $(TABLE_FORMAT),) $(if $(WRITE_MODE),--write-mode $(WRITE_MODE),) $(if $(DEBEZIUM),--debezium $(DEBEZIUM),) $(if $(TRANSACTIONS),--transactions $(TRANSACTIONS),) $(if $(CAPTURE),--capture $(CAPTURE),)

clean:            ## remove local state (keeps the venv and jars)
	rm -rf .local/warehouse .local/tmp

.PHONY: stack-up stack-down stack-status
stack-up: setup   ## local MariaDB -> Kafka Connect + Debezium -> Apache Kafka (docs/LOCAL_STACK.md)
	@$(BIN)/local-stack up --init-sql sql/01_create_customer.sql

stack-down:       ## stop the local stack and the local job (data stays in .local/stack)
	@$(BIN)/local-stack down

stack-status:
	@$(BIN)/local-stack status

.PHONY: fuzz
fuzz: setup       ## the decoder's property and fuzz tests with a longer budget (FUZZ_EXAMPLES per property, FUZZ_BATCHES batches)
	@FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),5000) FUZZ_BATCHES=$(or $(FUZZ_BATCHES),20) $(PY) -m pytest -s -p no:randomly --timeout 0 \
	  --hypothesis-show-statistics tests/unit/test_decoder_properties.py tests/job/test_decoder_fuzz.py $(PYTEST_ARGS)

.PHONY: bench
bench: setup      ## benchmarks (docs/BENCHMARKS.md); QUICK=1: <2 min, BENCH_ARGS="--sections a --compare REV"; PEERS=1: the job beside Flink CDC, the Iceberg sink and the AWS sample (installs those into .local/peers)
	@$(BIN)/bench $(if $(QUICK),--quick,) $(if $(PEERS),--peers,) $(BENCH_ARGS)
