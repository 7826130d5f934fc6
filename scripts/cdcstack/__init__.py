"""cdcstack: the local pipeline stack behind `local-stack` (docs/LOCAL_STACK.md).

A source database -> Apache Kafka (KRaft, one node) <- Kafka Connect running the Debezium connector
for that source, as plain processes on 127.0.0.1. Modules:

  plumbing   the configuration (StackConfig), state directory and ports; launching, health-waiting and stopping processes;
             the SourceEngine interface every source module provides
  kafka      the Apache Kafka broker
  connect    the Kafka Connect worker and the connector's REST calls
  mariadb    the MariaDB source (Debezium's MySQL connector)           } one module per source engine,
  postgres   the PostgreSQL source (Debezium's PostgreSQL connector)   } the same functions in each
  sources    the registry: --source name -> engine module
  commands   the command line: up, down, status, logs, sql

Imports go one way: the engines import plumbing (and connect), commands imports the registry;
plumbing, kafka and connect never import an engine.
"""
