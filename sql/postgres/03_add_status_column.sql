-- Demo scenario (PostgreSQL), step 3: schema evolution; the counterpart of
-- sql/03_add_status_column.sql. A new column with a constant default: PostgreSQL 11+ adds it
-- without rewriting the table, existing rows read 'Green', and no event is emitted for them.
-- The next event of the table carries the new column (and its default) in its schema.
SET ROLE salesdb_owner;

ALTER TABLE customer ADD COLUMN status VARCHAR(16) DEFAULT 'Green';

-- Changes after the ALTER: they carry the status column.
UPDATE customer SET status = 'Red', updated_at = '2024-03-05 08:00:00.000000' WHERE acct_balance < 0;
UPDATE customer SET status = 'Amber', loyalty_points = loyalty_points + 5, updated_at = '2024-03-05 08:05:00.000000'
 WHERE cust_id = 12;
INSERT INTO customer
  (cust_id, name, email, mktsegment, city, country_code, acct_balance, loyalty_points, birth_date, created_at, updated_at)
VALUES
  (34, 'Maya Levi', 'maya.levi@example.il', 'BUILDING', 'Haifa', 'IL', 640.00, 0, '2000-01-01', '2024-03-05 09:00:00', '2024-03-05 09:00:00.000000');
INSERT INTO customer
  (cust_id, name, email, mktsegment, city, country_code, acct_balance, loyalty_points, birth_date, created_at, updated_at, status)
VALUES
  (35, 'Omar Haddad', 'omar.haddad@example.jo', 'AUTOMOBILE', 'Amman', 'JO', 75.25, 0, NULL, '2024-03-05 09:01:00', '2024-03-05 09:01:00.000000', 'Amber');
DELETE FROM customer WHERE cust_id = 20;
