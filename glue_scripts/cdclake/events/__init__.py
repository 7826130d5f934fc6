"""Debezium change events -> ordered, typed row images: the envelope, positions in the source log,
Connect types, decoding per schema group, the batch's group aggregate and the source's DDL
statements. Imports only `common`; never reads or writes a lake table."""
