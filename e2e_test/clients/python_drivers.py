"""Real Python drivers against an Eddy server: psycopg 3 (binary parameters, prepare=True),
psycopg2, the SQLAlchemy 2 inspector and asyncpg (binary results).

Usage: python3 python_drivers.py HOST PORT DRIVER...   (DRIVER: psycopg psycopg2 sqlalchemy asyncpg)
Each driver creates its own table, inserts, and reads back with type checks. Exits non-zero
on the first failure. A missing driver module exits with status 3 so the caller can skip.
"""
import asyncio
import datetime
import decimal
import importlib.util
import sys

HOST, PORT = sys.argv[1], int(sys.argv[2])
DSN = f"host={HOST} port={PORT} user=root dbname=dev"
URL_DB = f"root@{HOST}:{PORT}/dev"

TS = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def check_row(row, label):
    assert row[0] == 1 and isinstance(row[0], int), (label, row)
    assert row[1] == "alpha", (label, row)
    assert row[2] == decimal.Decimal("12.50"), (label, row)
    assert row[3] == TS, (label, row)


def run_psycopg():
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("CREATE TABLE py3 (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
        with conn.cursor(binary=True) as cur:
            cur.execute("INSERT INTO py3 VALUES (%s, %s, %s, %s)", (1, "alpha", decimal.Decimal("12.50"), TS))
        for _ in range(3):
            row = conn.execute("SELECT id, name, amount, ts FROM py3 WHERE id = %s", (1,), prepare=True).fetchone()
            check_row(row, "psycopg")
        # MATERIALIZED VIEW: create one over py3 and read it back here once the streaming core lands.
    print("psycopg ok")


def run_psycopg2():
    import psycopg2

    conn = psycopg2.connect(DSN)
    cur = conn.cursor()
    cur.execute("CREATE TABLE py2 (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
    cur.execute("INSERT INTO py2 VALUES (%s, %s, %s, %s)", (1, "alpha", decimal.Decimal("12.50"), TS))
    conn.commit()
    cur.execute("SELECT id, name, amount, ts FROM py2 WHERE id = %s", (1,))
    check_row(cur.fetchone(), "psycopg2")
    conn.commit()
    conn.close()
    print("psycopg2 ok")


def run_sqlalchemy():
    import sqlalchemy as sa

    engine = sa.create_engine(f"postgresql+psycopg2://{URL_DB}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE sa1 (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, amount NUMERIC(10,2))"))
        conn.execute(sa.text("INSERT INTO sa1 VALUES (1, 'alpha', 12.50)"))
    insp = sa.inspect(engine)
    assert "public" in insp.get_schema_names(), insp.get_schema_names()
    assert "sa1" in insp.get_table_names(), insp.get_table_names()
    assert insp.get_view_names() == [], insp.get_view_names()
    assert insp.get_materialized_view_names() == [], insp.get_materialized_view_names()
    pk = insp.get_pk_constraint("sa1")
    assert pk["constrained_columns"] == ["id"], pk
    # get_columns: see the replay test's known gaps (pg_sequence subquery) before enabling it.
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT id, name, amount FROM sa1")).one()
        assert row == (1, "alpha", decimal.Decimal("12.50")), row
    print("sqlalchemy ok")


def run_asyncpg():
    import asyncpg

    async def main():
        conn = await asyncpg.connect(host=HOST, port=PORT, user="root", database="dev")
        await conn.execute("CREATE TABLE apg (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
        await conn.execute("INSERT INTO apg VALUES ($1, $2, $3, $4)", 1, "alpha", decimal.Decimal("12.50"), TS)
        row = await conn.fetchrow("SELECT id, name, amount, ts FROM apg WHERE id = $1", 1)
        check_row(tuple(row), "asyncpg")
        await conn.close()

    asyncio.run(main())
    print("asyncpg ok")


RUNNERS = {"psycopg": run_psycopg, "psycopg2": run_psycopg2, "sqlalchemy": run_sqlalchemy, "asyncpg": run_asyncpg}

if __name__ == "__main__":
    for name in sys.argv[3:]:
        module = {"sqlalchemy": "sqlalchemy"}.get(name, name)
        if importlib.util.find_spec(module) is None:
            print(f"missing python module {module}")
            sys.exit(3)
        RUNNERS[name]()
