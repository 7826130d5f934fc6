"""What every layer shares: the lake table's contract (`_cdc_*` columns, `cdc.*` properties, policies),
the raw-record contract, the job arguments, the batch report, SQL quoting, commit-conflict retries
and the log format. Imports nothing else of cdclake."""
