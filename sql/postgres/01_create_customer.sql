-- Demo scenario (PostgreSQL), step 1: the source table and its initial rows; the counterpart of
-- sql/01_create_customer.sql. Loaded before the Debezium connector is registered, these rows reach
-- Kafka as snapshot events (op "r"). Run once, connected to database salesdb, on a new database:
--   local-stack up --source postgres --init-sql sql/postgres/01_create_customer.sql
-- Types: NUMERIC(12,2) (precise: bytes + scale), DATE (days), TIMESTAMP(0) and TIMESTAMP(6)
-- (microseconds), an ENUM type, CHAR, VARCHAR with UTF-8, INTEGER, NULLs.
--
-- The tables belong to salesdb_owner, a role the Debezium user is a member of: with
-- publication.autocreate.mode=filtered the connector sets the publication's table list itself,
-- and PostgreSQL lets only a table's owner add it to a publication.
SET ROLE salesdb_owner;

CREATE TYPE mktsegment AS ENUM ('AUTOMOBILE', 'BUILDING', 'FURNITURE', 'HOUSEHOLD', 'MACHINERY');

CREATE TABLE customer (
  cust_id        INTEGER        NOT NULL,
  name           VARCHAR(100)   NOT NULL,
  email          VARCHAR(255)   NOT NULL,
  mktsegment     mktsegment     NOT NULL,
  city           VARCHAR(64)    NULL,
  country_code   CHAR(2)        NOT NULL,
  acct_balance   NUMERIC(12, 2) NOT NULL DEFAULT 0.00,
  loyalty_points INTEGER        NOT NULL DEFAULT 0,
  birth_date     DATE           NULL,
  created_at     TIMESTAMP(0)   NOT NULL,
  updated_at     TIMESTAMP(6)   NOT NULL,
  PRIMARY KEY (cust_id)
);
-- Full before images in the WAL: without it an update arrives with before=null and a delete with
-- only the key (the lake still applies both: it upserts `after` and deletes by key), and an
-- unchanged large (TOASTed) value would be missing from the update's `after`.
ALTER TABLE customer REPLICA IDENTITY FULL;

INSERT INTO customer
  (cust_id, name, email, mktsegment, city, country_code, acct_balance, loyalty_points, birth_date, created_at, updated_at)
VALUES
  (1,  'Amelia Hart',       'amelia.hart@example.com',      'BUILDING',   'Leeds',       'GB',   711.56,  120, '1984-03-12', '2024-01-03 09:15:00', '2024-01-03 09:15:00.000000'),
  (2,  'Jonas Becker',      'jonas.becker@example.de',      'AUTOMOBILE', 'Stuttgart',   'DE',  4121.93,  860, '1979-11-02', '2024-01-04 10:02:11', '2024-01-04 10:02:11.120000'),
  (3,  'Priya Raman',       'priya.raman@example.in',       'MACHINERY',  'Chennai',     'IN',  -283.84,    0, '1991-07-23', '2024-01-05 14:40:05', '2024-02-11 08:00:00.000001'),
  (4,  'Lucas Moreau',      'lucas.moreau@example.fr',      'FURNITURE',  'Lyon',        'FR',  2866.83,  415, NULL,         '2024-01-08 08:30:00', '2024-01-08 08:30:00.000000'),
  (5,  'Sofia Rossi',       'sofia.rossi@example.it',       'HOUSEHOLD',  'Milan',       'IT',   794.47,   95, '1988-05-30', '2024-01-09 16:45:30', '2024-01-09 16:45:30.500000'),
  (6,  'Mateo García',      'mateo.garcia@example.es',      'BUILDING',   'Valencia',    'ES',  7638.57, 1530, '1975-12-19', '2024-01-11 11:11:11', '2024-03-01 12:00:00.250000'),
  (7,  'Hannah Lindqvist',  'hannah.lindqvist@example.se',  'HOUSEHOLD',  'Malmö',       'SE',  9561.95, 2210, '1969-02-14', '2024-01-12 07:55:42', '2024-01-12 07:55:42.000000'),
  (8,  'Kenji Watanabe',    'kenji.watanabe@example.jp',    'MACHINERY',  'Osaka',       'JP',  6819.74,  770, '1982-09-08', '2024-01-15 03:20:00', '2024-01-15 03:20:00.000000'),
  (9,  'Olivia Brown',      'olivia.brown@example.com',     'AUTOMOBILE', 'Denver',      'US',  2788.52,  300, '1995-04-01', '2024-01-16 19:05:17', '2024-01-16 19:05:17.999999'),
  (10, 'Noah Wilson',       'noah.wilson@example.com',      'FURNITURE',  NULL,          'US',  5121.28,  640, '1987-10-10', '2024-01-18 13:37:00', '2024-01-18 13:37:00.000000'),
  (11, 'Zoë Müller',        'zoe.mueller@example.ch',       'BUILDING',   'Zürich',      'CH',  -686.40,   15, '1993-06-17', '2024-01-19 09:00:00', '2024-01-19 09:00:00.000000'),
  (12, 'Chen Wei',          'chen.wei@example.cn',          'MACHINERY',  'Shenzhen',    'CN',  9331.13, 1980, '1980-01-25', '2024-01-22 02:10:45', '2024-01-22 02:10:45.000000'),
  (13, 'Fatima Zahra',      'fatima.zahra@example.ma',      'HOUSEHOLD',  'Casablanca',  'MA',  3572.81,  410, NULL,         '2024-01-23 17:25:00', '2024-01-23 17:25:00.000000'),
  (14, 'Liam O''Connor',    'liam.oconnor@example.ie',      'AUTOMOBILE', 'Cork',        'IE',   162.20,   20, '1998-08-08', '2024-01-25 10:45:12', '2024-01-25 10:45:12.000000'),
  (15, 'Ana Souza',         'ana.souza@example.br',         'FURNITURE',  'Recife',      'BR',  8959.06, 1250, '1977-03-03', '2024-01-26 21:30:00', '2024-01-26 21:30:00.000000'),
  (16, 'Ethan Clarke',      'ethan.clarke@example.ca',      'BUILDING',   'Halifax',     'CA',  1428.89,  180, '1990-12-31', '2024-01-29 06:00:00', '2024-01-29 06:00:00.000000'),
  (17, 'Mia Novak',         'mia.novak@example.cz',         'HOUSEHOLD',  'Brno',        'CZ',  4480.00,  505, '1985-07-07', '2024-02-01 12:12:12', '2024-02-01 12:12:12.000000'),
  (18, 'Arjun Mehta',       'arjun.mehta@example.in',       'MACHINERY',  'Pune',        'IN',  2257.46,  260, '1992-02-29', '2024-02-02 15:48:33', '2024-02-02 15:48:33.000000'),
  (19, 'Emma Jansen',       'emma.jansen@example.nl',       'AUTOMOBILE', 'Utrecht',     'NL',  6323.35,  720, '1981-11-11', '2024-02-05 08:08:08', '2024-02-05 08:08:08.000000'),
  (20, 'Yusuf Demir',       'yusuf.demir@example.tr',       'FURNITURE',  'Izmir',       'TR',    -1.50,    0, '1999-09-09', '2024-02-06 18:00:00', '2024-02-06 18:00:00.000000'),
  (21, 'Grace Kim',         'grace.kim@example.kr',         'BUILDING',   'Busan',       'KR',  5040.73,  610, '1986-04-21', '2024-02-08 04:44:44', '2024-02-08 04:44:44.000000'),
  (22, 'Oscar Nilsen',      'oscar.nilsen@example.no',      'HOUSEHOLD',  'Bergen',      'NO',  3309.12,  380, NULL,         '2024-02-09 09:09:09', '2024-02-09 09:09:09.000000'),
  (23, 'Isabella Costa',    'isabella.costa@example.pt',    'MACHINERY',  'Porto',       'PT',  7790.00,  990, '1974-05-05', '2024-02-12 20:20:20', '2024-02-12 20:20:20.000000'),
  (24, 'William Turner',    'william.turner@example.au',    'AUTOMOBILE', 'Perth',       'AU',   980.44,  110, '1996-10-30', '2024-02-13 23:59:59', '2024-02-13 23:59:59.999000'),
  (25, 'Aisha Bello',       'aisha.bello@example.ng',       'FURNITURE',  'Lagos',       'NG',  4415.67,  530, '1989-08-18', '2024-02-15 07:30:00', '2024-02-15 07:30:00.000000'),
  (26, 'Mikhail Petrov',    'mikhail.petrov@example.bg',    'BUILDING',   'Plovdiv',     'BG',  2890.25,  340, '1983-01-13', '2024-02-16 12:00:01', '2024-02-16 12:00:01.000000'),
  (27, 'Chloé Dubois',      'chloe.dubois@example.be',      'HOUSEHOLD',  'Liège',       'BE',  6104.90,  705, '1994-03-27', '2024-02-19 10:10:10', '2024-02-19 10:10:10.000000'),
  (28, 'Diego Fernández',   'diego.fernandez@example.ar',   'MACHINERY',  'Rosario',     'AR',  1875.00,  205, NULL,         '2024-02-20 16:16:16', '2024-02-20 16:16:16.000000'),
  (29, 'Nora Hansen',       'nora.hansen@example.dk',       'AUTOMOBILE', 'Aarhus',      'DK',  9999.99, 2500, '1970-06-06', '2024-02-22 05:05:05', '2024-02-22 05:05:05.000000'),
  (30, 'Tomás Horvat',      'tomas.horvat@example.hr',      'FURNITURE',  'Split',       'HR',   350.75,   40, '1997-12-01', '2024-02-23 22:22:22', '2024-02-23 22:22:22.000000');
