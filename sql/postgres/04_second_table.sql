-- Demo scenario (PostgreSQL), step 4: a second table, created while the pipeline runs, with a
-- composite primary key (the Kafka message key then has two fields); the counterpart of
-- sql/04_second_table.sql. More types: SMALLINT, NUMERIC(20,0) (MySQL's BIGINT UNSIGNED range),
-- TIMESTAMP(3) and TIMESTAMPTZ (a zoned string).
SET ROLE salesdb_owner;

CREATE TABLE orders (
  order_id    INTEGER        NOT NULL,
  line_no     SMALLINT       NOT NULL,
  cust_id     INTEGER        NOT NULL,
  sku         VARCHAR(32)    NOT NULL,
  quantity    INTEGER        NOT NULL,
  unit_price  NUMERIC(10, 2) NOT NULL,
  state       VARCHAR(16)    NOT NULL DEFAULT 'NEW' CHECK (state IN ('NEW', 'SHIPPED', 'CANCELLED')),
  tracking_no NUMERIC(20, 0) NULL,
  ordered_at  TIMESTAMP(3)   NOT NULL,
  changed_at  TIMESTAMPTZ    NOT NULL DEFAULT now(),
  PRIMARY KEY (order_id, line_no)
);
ALTER TABLE orders REPLICA IDENTITY FULL;
-- The connector's filtered publication lists the tables that existed when its task started; a new
-- table joins the stream once it is in the publication. Added here, its first rows are streamed
-- (the connector would add it itself only at its next start, without the rows written meanwhile).
ALTER PUBLICATION dbz_publication ADD TABLE orders;

INSERT INTO orders (order_id, line_no, cust_id, sku, quantity, unit_price, ordered_at) VALUES
  (1001, 1,  1, 'CHAIR-OAK-01',    4,  89.90, '2024-03-06 10:00:00.125'),
  (1001, 2,  1, 'TABLE-OAK-02',    1, 449.00, '2024-03-06 10:00:00.125'),
  (1002, 1,  6, 'DRILL-PRO-18V',   2, 129.99, '2024-03-06 10:05:30.500'),
  (1003, 1, 12, 'GEAR-BOX-7',     10,  37.45, '2024-03-06 11:20:00.000'),
  (1003, 2, 12, 'BELT-V-120',     25,   6.10, '2024-03-06 11:20:00.000'),
  (1003, 3, 12, 'BEARING-6204',   40,   2.85, '2024-03-06 11:20:00.000'),
  (1004, 1, 29, 'TYRE-205-55R16',  4,  92.00, '2024-03-06 12:45:10.999'),
  (1005, 1, 15, 'SOFA-3S-GREY',    1, 899.00, '2024-03-06 13:00:00.000');

-- Shipping sets a state and a 20-digit tracking number (above the signed 64-bit range).
UPDATE orders SET state = 'SHIPPED', tracking_no = 18446744073709551000, changed_at = now() WHERE order_id = 1001;
UPDATE orders SET quantity = 3, changed_at = now() WHERE order_id = 1003 AND line_no = 2;
-- One line of a multi-line order is removed; another order is cancelled.
DELETE FROM orders WHERE order_id = 1003 AND line_no = 3;
UPDATE orders SET state = 'CANCELLED', changed_at = now() WHERE order_id = 1004;
