"""events/transactions.decide: which records of a batch wait for the rest of their source transaction."""

from __future__ import annotations

from cdclake.events.transactions import REMEMBER_RELEASED, HoldState, Part, decide

TXN = "mdb.transaction"
ORDERS, LINES, DDL = "mdb.shop.orders", "mdb.shop.order_lines", "mdb"


def begin(txid: str, offset: int) -> Part:
    return Part(txid, None, TXN, 0, 1, offset, begun=True)


def end(txid: str, offset: int, begun: bool = True, **counts: int) -> Part:
    """BEGIN and END of one transaction (one aggregate row: same transaction, same partition); with
    `begun` False, the END alone."""
    counts_ = tuple((f"shop.{c}", n) for c, n in counts.items())
    return Part(txid, None, TXN, 0, 1 + begun, offset, ended=True, end_counts=counts_, begun=begun)


def changes(txid: str, topic: str, offset: int, seq: int, n: int = 1, partition: int = 0) -> Part:
    return Part(txid, f"shop.{topic.rsplit('.', 1)[-1]}", topic, partition, n, offset, seq)


NONE = HoldState()


def test_complete_transactions_hold_nothing():
    parts = [end("t1", 0, orders=1, order_lines=2), changes("t1", ORDERS, 0, 10), changes("t1", LINES, 0, 11, n=2)]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {} and d.open == () and d.state.since == {}


def test_transaction_without_its_end_is_held_from_its_first_record_in_every_partition():
    parts = [
        end("t1", 0, orders=1, order_lines=1),
        changes("t1", ORDERS, 0, 10),
        changes("t1", LINES, 0, 11),
        begin("t2", 2),
        changes("t2", ORDERS, 1, 20),
        changes("t2", LINES, 1, 21),
    ]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {(TXN, 0): 2, (ORDERS, 0): 1, (LINES, 0): 1}
    assert d.open == ("t2",) and d.state.since == {"t2": 100.0}


def test_end_read_before_all_changes_holds_the_transaction():
    # The END counts two lines; the lines' topic is behind and only one is read yet.
    parts = [end("t1", 0, orders=1, order_lines=2), changes("t1", ORDERS, 5, 10), changes("t1", LINES, 7, 11)]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {(TXN, 0): 0, (ORDERS, 0): 5, (LINES, 0): 7} and d.open == ("t1",)


def test_complete_transactions_after_an_open_one_are_held_too():
    parts = [
        end("t0", 0, order_lines=1),  # committed before t1: applied
        changes("t0", LINES, 3, 5),
        begin("t1", 2),
        changes("t1", ORDERS, 0, 10),
        end("t2", 3, order_lines=1),
        changes("t2", LINES, 4, 20),
    ]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.held == ("t1", "t2") and d.open == ("t1",)
    assert d.starts == {(TXN, 0): 2, (ORDERS, 0): 0, (LINES, 0): 4}


def test_changes_whose_transaction_records_are_not_read_yet_are_held():
    parts = [end("t1", 0, orders=1), changes("t1", ORDERS, 0, 10), changes("t9", ORDERS, 1, 20)]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {(ORDERS, 0): 1} and d.open == ("t9",)


def test_nothing_is_held_while_no_end_was_ever_read():
    # Transaction metadata on but the transaction topic not read: holding would wait for ever.
    parts = [changes("t1", ORDERS, 0, 10), changes("t2", ORDERS, 1, 20)]
    assert decide(parts, NONE, now=100.0, hold_seconds=600, gating=False).starts == {}


def test_a_transaction_longer_than_a_batch_is_held_from_its_begin_also_without_any_end_in_the_batch():
    # The first batch of a 5,000-row transaction: its BEGIN and part of its rows, no END of any transaction.
    parts = [begin("t1", 4), changes("t1", ORDERS, 0, 10, n=2_500)]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {(TXN, 0): 4, (ORDERS, 0): 0} and d.open == ("t1",)


def test_an_end_sent_again_without_its_begin_or_changes_holds_nothing():
    # The connector's producer sent t1's END twice (a broker restart): t1 was applied in the batch that
    # read its BEGIN, changes and first END; this batch reads the second END and t2 whole.
    parts = [end("t1", 2, begun=False, orders=1), end("t2", 3, orders=1), changes("t2", ORDERS, 1, 20)]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {} and d.open == ()
    # An END alone whose changes are read is not one sent again: counted short, it is held.
    parts = [end("t3", 4, begun=False, orders=2), changes("t3", ORDERS, 2, 30)]
    assert decide(parts, NONE, now=100.0, hold_seconds=600, gating=True).open == ("t3",)


def test_records_held_before_keep_gating_on_a_batch_without_an_end():
    parts = [begin("t2", 0), changes("t2", ORDERS, 1, 20)]
    d = decide(parts, HoldState({"t2": 50.0}), now=100.0, hold_seconds=600, gating=True)
    assert d.starts == {(TXN, 0): 0, (ORDERS, 0): 1} and d.state.since == {"t2": 50.0}


def test_transaction_open_past_the_bound_is_released_and_its_late_end_holds_nothing():
    parts = [begin("t2", 0), changes("t2", ORDERS, 1, 20)]
    d = decide(parts, HoldState({"t2": 50.0}), now=700.0, hold_seconds=600, gating=True)
    assert d.starts == {} and d.released == ("t2",) and d.state.released == ("t2",)
    # Its END arrives later, counting changes applied long ago: nothing waits for them.
    late = [end("t2", 9, orders=3), changes("t2", ORDERS, 7, 30)]
    d2 = decide(late, d.state, now=710.0, hold_seconds=600, gating=False)
    assert d2.starts == {} and d2.state.released == ()


def test_the_hold_bound_counts_from_the_first_batch_that_held_it():
    parts = [begin("t2", 0), changes("t2", ORDERS, 1, 20)]
    first = decide(parts, NONE, now=1000.0, hold_seconds=600, gating=True)
    assert first.state.since == {"t2": 1000.0}
    assert decide(parts, first.state, now=1500.0, hold_seconds=600, gating=True).released == ()
    assert decide(parts, first.state, now=1601.0, hold_seconds=600, gating=True).released == ("t2",)


def test_released_transactions_are_remembered_up_to_a_bound():
    before = HoldState(released=tuple(f"old{i}" for i in range(REMEMBER_RELEASED)))
    parts = [begin("t2", 0), changes("t2", ORDERS, 1, 20)]
    d = decide(parts, HoldState({"t2": 0.0}, before.released), 700.0, 600, gating=True)
    assert len(d.state.released) == REMEMBER_RELEASED and d.state.released[-1] == "t2"
    assert "old0" not in d.state.released


def test_schema_change_at_or_after_the_first_held_change_is_held():
    parts = [
        begin("t2", 0),
        changes("t2", ORDERS, 1, 20),
        Part(None, None, DDL, 0, 1, 3, 15),  # before the held change: applied
        Part(None, None, DDL, 0, 1, 4, 25),  # after it: held, with everything after it
    ]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=True)
    assert d.starts == {(TXN, 0): 0, (ORDERS, 0): 1, (DDL, 0): 4}


def test_a_transaction_split_over_partitions_is_held_in_each():
    parts = [
        end("t1", 0, orders=3),
        changes("t1", ORDERS, 4, 10, n=2, partition=0),
        changes("t1", ORDERS, 9, 11, n=1, partition=1),
        begin("t2", 1),
        changes("t2", ORDERS, 5, 20, partition=1),
    ]
    d = decide(parts, NONE, now=100.0, hold_seconds=600, gating=False)
    assert d.starts == {(TXN, 0): 1, (ORDERS, 1): 5} and d.held == ("t2",)


def test_counts_are_summed_over_partitions_and_batches():
    # Three orders counted by END; two in the partition read now, one held from before (same aggregate).
    parts = [end("t1", 0, orders=3), changes("t1", ORDERS, 0, 10, n=2), changes("t1", ORDERS, 0, 12, 1, partition=1)]
    assert decide(parts, NONE, now=100.0, hold_seconds=600, gating=True).starts == {}
