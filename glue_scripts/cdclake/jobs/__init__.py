"""The two jobs and their edges: the streaming job's life cycle and micro-batch function, the
tables of a batch written at once, the streaming sources, the scheduled maintenance job and the
one module that touches `awsglue` (glue_entry)."""
