"""Benchmarks of the CDC job: `bench` / `make bench`, results in docs/BENCHMARKS.md.

generator.py  Debezium change streams built from the real messages in tests/fixtures/debezium/,
              with the expected lake state they must produce
checker.py    compares a lake table with that expected state
baseline.py   the AWS sample's batch logic, re-implemented as the baseline
measure.py    timers, Spark job counts, process-tree RSS, table file statistics
apply.py, growth.py, endtoend.py   the three benchmark sections; report.py the tables
"""
