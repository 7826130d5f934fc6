-- Demo scenario (PostgreSQL), step 2: ordinary traffic after the snapshot; the counterpart of
-- sql/02_changes.sql. Each statement becomes one Debezium event per row: inserts "c", updates "u"
-- (full before and after images with REPLICA IDENTITY FULL), deletes "d" followed by a tombstone.
SET ROLE salesdb_owner;

-- New customers.
INSERT INTO customer
  (cust_id, name, email, mktsegment, city, country_code, acct_balance, loyalty_points, birth_date, created_at, updated_at)
VALUES
  (31, 'Elena Popescu',  'elena.popescu@example.ro',  'HOUSEHOLD',  'Cluj-Napoca', 'RO', 1520.10,  60, '1990-02-02', '2024-03-01 09:00:00', '2024-03-01 09:00:00.000000'),
  (32, 'Samuel Okafor',  'samuel.okafor@example.gh',  'MACHINERY',  'Kumasi',      'GH',  845.00,  10, NULL,         '2024-03-01 09:05:00', '2024-03-01 09:05:00.000000'),
  (33, 'Lena Schmidt',   'lena.schmidt@example.at',   'FURNITURE',  'Graz',        'AT', 3300.33, 330, '1986-06-16', '2024-03-01 09:10:00', '2024-03-01 09:10:00.000000');

-- A payment lowers a balance; a customer moves; a loyalty bonus for everyone in one segment.
UPDATE customer SET acct_balance = acct_balance - 250.00, updated_at = '2024-03-02 10:00:00.000001'
 WHERE cust_id = 5;
UPDATE customer SET city = 'Gothenburg', email = 'hannah.l@example.se', updated_at = '2024-03-02 10:01:00.000000'
 WHERE cust_id = 7;
UPDATE customer SET loyalty_points = loyalty_points + 50, updated_at = '2024-03-02 10:02:00.000000'
 WHERE mktsegment = 'AUTOMOBILE';

-- The same row changed twice in one transaction: both changes share the commit, their LSNs order
-- them, and consumers must keep the last one.
BEGIN;
UPDATE customer SET acct_balance = 5000.00, updated_at = '2024-03-02 11:00:00.000000' WHERE cust_id = 10;
UPDATE customer SET acct_balance = 5100.00, city = 'Boston', updated_at = '2024-03-02 11:00:00.000001' WHERE cust_id = 10;
COMMIT;

-- A customer closes the account; a row inserted above is removed again.
DELETE FROM customer WHERE cust_id = 3;
DELETE FROM customer WHERE cust_id = 32;
