-- A budget store as the meter kept it before its run-wide reads used an index: usage rows per
-- (run, principal), two rows of the older layout kept under the run alone ('run:<id>'), and one
-- reservation of 1 call in run 'r:1%' left open by an owner whose process died before settling.
-- Written by the earlier meter itself (SqliteMeter of commit ad71360), dumped with iterdump().
BEGIN TRANSACTION;
CREATE TABLE budget_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO "budget_meta" VALUES('schema_version','1');
CREATE TABLE budget_owners (owner TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, started TEXT NOT NULL, expires REAL NOT NULL);
INSERT INTO "budget_owners" VALUES('f273c79e9ab64aed89f6f929e1588c3e','a88c3f42-dee4-44fe-98c2-ebfbbd3c9273/pid:[4026531836]',27859,'3131031',1.79648146777001190181e+09);
CREATE TABLE budget_reservations (token TEXT PRIMARY KEY, owner TEXT NOT NULL, run_scope TEXT NOT NULL, principal_scope TEXT NOT NULL, ledger_key TEXT, calls REAL NOT NULL, items REAL NOT NULL, bytes REAL NOT NULL, money REAL NOT NULL, sent_calls REAL NOT NULL, sent_items REAL NOT NULL, sent_bytes REAL NOT NULL, sent_money REAL NOT NULL, reclaimed REAL);
INSERT INTO "budget_reservations" VALUES('3de0787db417475dab1b53d57bcd4f71','f273c79e9ab64aed89f6f929e1588c3e','run@r%3A1%25:principal:t1:bob','principal:t1:bob',NULL,1.0,1.0,0.0,0.0,1.0,1.0,0.0,0.0,NULL);
CREATE TABLE budget_usage (
    scope TEXT PRIMARY KEY,
    calls REAL NOT NULL,
    items REAL NOT NULL,
    bytes REAL NOT NULL,
    money REAL NOT NULL
);
INSERT INTO "budget_usage" VALUES('run@r:principal:t1:alice',2.0,2.0,14.0,0.0);
INSERT INTO "budget_usage" VALUES('principal:t1:alice',8.0,8.0,56.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r:principal:t1:bob',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('principal:t1:bob',8.0,8.0,49.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r%3A1%25:principal:t1:alice',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r%3A1%25:principal:t1:bob',4.0,4.0,21.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r%3A1%25:principal:t%3A2%25:alice',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('principal:t%3A2%25:alice',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r;x:principal:t1:alice',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r0:principal:t1:bob',1.0,1.0,7.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r%253A1%2525:principal:t1:alice',4.0,4.0,28.0,0.0);
INSERT INTO "budget_usage" VALUES('run@r%3A:principal:t1:bob',2.0,2.0,14.0,0.0);
INSERT INTO "budget_usage" VALUES('run:r',5.0,5.0,50.0,0.0);
INSERT INTO "budget_usage" VALUES('run:r:1%',7.0,7.0,70.0,0.0);
CREATE INDEX budget_reservations_owner ON budget_reservations (owner);
COMMIT;
