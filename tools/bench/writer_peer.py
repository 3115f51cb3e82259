"""The session writer's peer for tools/bench/writer.sh: Python's sqlite3 inserting the same rows as 3dstape's writer.

Reads the schema and the first exchange's rows (the exchange and its message rows, exactly as 3dstape stored them)
from SOURCE, a session file TapBench wrote, then inserts COUNT copies into a new file OUT with the writer's settings
(16 KiB pages, WAL, synchronous OFF, checkpoints every 4 MiB, foreign keys on) in transactions of 256, and prints
the process's CPU per exchange. It stores what the writer stored, without masking or 3DS extraction: SQLite's share
of the writer's work, done from Python.
"""
import os
import sqlite3
import sys
import time

source, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = sqlite3.connect(source)
tables = [sql for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL")]
# Only the index kept while recording; the writer builds the others when it closes the file.
indexes = [sql for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'messages_by_exchange'")]
exchange = src.execute("SELECT * FROM exchanges ORDER BY id LIMIT 1").fetchone()
messages = src.execute("SELECT * FROM messages WHERE exchange_id = ? ORDER BY id", (exchange[0],)).fetchall()
connection = src.execute("SELECT * FROM connections ORDER BY id LIMIT 1").fetchone()
src.close()

for suffix in ("", "-wal", "-shm"):
    if os.path.exists(out + suffix):
        os.remove(out + suffix)
db = sqlite3.connect(out, isolation_level=None)
db.execute("PRAGMA page_size=16384")
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=OFF")
db.execute(f"PRAGMA wal_autocheckpoint={(4 << 20) // 16384}")
db.execute("PRAGMA foreign_keys=ON")
for sql in tables + indexes:
    db.execute(sql)
db.execute(f"INSERT INTO connections VALUES ({','.join('?' * len(connection))})", connection)
x_sql = f"INSERT INTO exchanges VALUES (NULL{',?' * (len(exchange) - 1)})"
m_sql = f"INSERT INTO messages VALUES (NULL,?{',?' * (len(messages[0]) - 2)})"
x_values, m_values = exchange[1:], [m[2:] for m in messages]

start = time.process_time()
for first in range(0, count, 256):
    db.execute("BEGIN")
    for _ in range(first, min(count, first + 256)):
        cur = db.execute(x_sql, x_values)
        for m in m_values:
            db.execute(m_sql, (cur.lastrowid,) + m)
    db.execute("COMMIT")
db.close()
print(f"exchanges {count} cpu_us_per_exchange {(time.process_time() - start) * 1e6 / count:.2f}")
