"""Outside Glue only: the local SparkSession (jars from .local/jars, `CDC_*` variables) and the
tests' fault injection. Glue never calls into it: its entry builds Glue's own session
(jobs/glue_entry.py), and fault injection stays off unless its variable is set."""
