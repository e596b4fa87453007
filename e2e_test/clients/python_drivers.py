"""Real Python drivers against an Eddy server: psycopg 3 (binary parameters, prepare=True),
psycopg2, the SQLAlchemy 2 inspector (including materialized views) and asyncpg (binary results).

Usage: python3 python_drivers.py HOST PORT DRIVER...   (DRIVER: psycopg psycopg2 sqlalchemy asyncpg)
Each driver creates its own table and a materialized view over it (a GROUP BY aggregate),
inserts, and reads both back with type checks. Exits non-zero
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


TS0 = datetime.datetime(2024, 1, 1, 0, 0, 0, tzinfo=datetime.timezone.utc)


def mv_sql(view, table):
    """A GROUP BY aggregate over `table`, maintained incrementally."""
    return (f"CREATE MATERIALIZED VIEW {view} AS SELECT name, count(*) AS n, sum(amount) AS total, "
            f"max(ts) AS last_ts FROM {table} GROUP BY name")


def check_mv_rows(rows, label):
    """The view over rows (1, alpha, 12.50, TS), (2, alpha, 1.25, TS0), (3, beta, 0.10, TS0)."""
    rows = sorted(tuple(r) for r in rows)
    assert len(rows) == 2, (label, rows)
    assert rows[0] == ("alpha", 2, decimal.Decimal("13.75"), TS), (label, rows)
    assert rows[1] == ("beta", 1, decimal.Decimal("0.10"), TS0), (label, rows)
    for r in rows:
        assert isinstance(r[1], int) and isinstance(r[2], decimal.Decimal), (label, r)
        assert isinstance(r[3], datetime.datetime) and r[3].tzinfo is not None, (label, r)


MORE_ROWS = [(2, "alpha", decimal.Decimal("1.25"), TS0), (3, "beta", decimal.Decimal("0.10"), TS0)]


def check_row(row, label):
    assert row[0] == 1 and isinstance(row[0], int), (label, row)
    assert row[1] == "alpha", (label, row)
    assert row[2] == decimal.Decimal("12.50"), (label, row)
    assert row[3] == TS, (label, row)


def run_psycopg():
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("CREATE TABLE py3 (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
        conn.execute(mv_sql("py3_mv", "py3"))
        with conn.cursor(binary=True) as cur:
            cur.execute("INSERT INTO py3 VALUES (%s, %s, %s, %s)", (1, "alpha", decimal.Decimal("12.50"), TS))
            cur.executemany("INSERT INTO py3 VALUES (%s, %s, %s, %s)", MORE_ROWS)
        for _ in range(3):
            row = conn.execute("SELECT id, name, amount, ts FROM py3 WHERE id = %s", (1,), prepare=True).fetchone()
            check_row(row, "psycopg")
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT name, n, total, last_ts FROM py3_mv WHERE n >= %s", (1,))
                check_mv_rows(cur.fetchall(), f"psycopg mv binary={binary}")
        kind = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'py3_mv'").fetchone()
        assert kind == ("m",), kind
        # Array columns from Python lists, in text and binary format.
        conn.execute("CREATE TABLE py3_arr (id INT PRIMARY KEY, xs INT[], tags TEXT[])")
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("INSERT INTO py3_arr VALUES (%s, %s, %s)", (int(binary), [1, None], ['a,b', '"q"']))
                cur.execute("SELECT xs, tags FROM py3_arr WHERE id = %s", (int(binary),))
                assert cur.fetchone() == ([1, None], ['a,b', '"q"']), binary
        # jsonb_agg in a view arrives as jsonb (decoded to Python values); percentiles as
        # float8 and float8[].
        conn.execute(
            "CREATE MATERIALIZED VIEW py3_json_mv AS SELECT jsonb_agg(xs ORDER BY id) AS lists, "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY id) AS med, "
            "percentile_cont(ARRAY[0, 1]) WITHIN GROUP (ORDER BY id DESC) AS ends FROM py3_arr"
        )
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT lists, med, ends FROM py3_json_mv")
                assert cur.fetchone() == ([[1, None], [1, None]], 0.5, [1.0, 0.0]), binary
        # jsonb operators give jsonb (decoded) for -> and #>, text for ->> and #>>, as in PostgreSQL.
        conn.execute("CREATE TABLE py3_j (id INT PRIMARY KEY, j JSONB)")
        conn.execute("""INSERT INTO py3_j VALUES (1, '{"a": {"b": [1, 2]}, "s": "x"}')""")
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT j -> 'a', j ->> 's', j #> '{a,b}', j #>> '{a,b}' FROM py3_j")
                assert cur.fetchone() == ({"b": [1, 2]}, "x", [1, 2], "[1, 2]"), binary
        # A UNION of an integer and a float/numeric column is described as the coerced type
        # (it was the left side's integer, and psycopg failed to parse '1.5' as one).
        conn.execute("CREATE TABLE py3_u (a INT, f DOUBLE PRECISION)")
        conn.execute("INSERT INTO py3_u VALUES (10, 1.5), (NULL, 2.25)")
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT a FROM py3_u UNION ALL SELECT f FROM py3_u")
                assert sorted(cur.fetchall(), key=repr) == sorted([(10.0,), (None,), (1.5,), (2.25,)], key=repr), binary
                cur.execute("SELECT 1 UNION SELECT 1.5")
                assert sorted(r[0] for r in cur.fetchall()) == [decimal.Decimal("1"), decimal.Decimal("1.5")], binary
        # uuid columns: Python UUIDs in and out, in text and binary format, a generated default.
        import uuid
        conn.execute("CREATE TABLE py3_uuid (id UUID PRIMARY KEY, n INT, made UUID DEFAULT gen_random_uuid())")
        for binary in (False, True):
            u = uuid.UUID(int=binary + 1)
            with conn.cursor(binary=binary) as cur:
                cur.execute("INSERT INTO py3_uuid (id, n) VALUES (%s, %s)", (u, int(binary)))
                cur.execute("SELECT id, made FROM py3_uuid WHERE id = %s", (u,))
                got, made = cur.fetchone()
                assert got == u and isinstance(made, uuid.UUID) and made.version == 4, (binary, got, made)
        # Parameters have the types psycopg declares for them, as in PostgreSQL: a float is
        # not truncated to the integer type of the column it is compared with or stored in
        # (1.5 * 2 was 2, `x < 4.5` lost x = 4, 4.6 was stored as 4), in text and binary format.
        conn.execute("CREATE TABLE py3_typed (id INT PRIMARY KEY, x INT, n NUMERIC)")
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT %s * 2, %s + 1", (1.5, 5))
                assert cur.fetchone() == (3.0, 6), binary
                cur.execute("INSERT INTO py3_typed VALUES (%s, %s, %s)", (10 + binary, 4.6, decimal.Decimal("2.25")))
                cur.execute("INSERT INTO py3_typed VALUES (%s, %s, %s)", (20 + binary, 4, 1))
                cur.execute("SELECT id FROM py3_typed WHERE x < %s AND id %% 2 = %s ORDER BY id", (4.5, int(binary)))
                assert cur.fetchall() == [(20 + binary,)], binary
                cur.execute("SELECT x, n FROM py3_typed WHERE id = %s", (10 + binary,))
                assert cur.fetchone() == (5, decimal.Decimal("2.25")), binary
                cur.execute("SELECT id FROM py3_typed WHERE n = %s ORDER BY id LIMIT %s", (decimal.Decimal("2.25"), 1))
                assert cur.fetchall() == [(10,)], binary
    print("psycopg ok")


def run_psycopg2():
    import psycopg2

    conn = psycopg2.connect(DSN)
    cur = conn.cursor()
    cur.execute("CREATE TABLE py2 (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
    cur.execute(mv_sql("py2_mv", "py2"))
    cur.execute("INSERT INTO py2 VALUES (%s, %s, %s, %s)", (1, "alpha", decimal.Decimal("12.50"), TS))
    cur.executemany("INSERT INTO py2 VALUES (%s, %s, %s, %s)", MORE_ROWS)
    conn.commit()
    cur.execute("SELECT id, name, amount, ts FROM py2 WHERE id = %s", (1,))
    check_row(cur.fetchone(), "psycopg2")
    cur.execute("SELECT name, n, total, last_ts FROM py2_mv")
    check_mv_rows(cur.fetchall(), "psycopg2 mv")
    conn.commit()
    conn.close()
    print("psycopg2 ok")


def run_sqlalchemy():
    import sqlalchemy as sa

    engine = sa.create_engine(f"postgresql+psycopg2://{URL_DB}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE sa1 (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, amount NUMERIC(10,2))"))
        conn.execute(sa.text("INSERT INTO sa1 VALUES (1, 'alpha', 12.50)"))
        conn.execute(sa.text("CREATE MATERIALIZED VIEW sa1_mv AS SELECT name, count(*) AS n, sum(amount) AS total "
                             "FROM sa1 GROUP BY name"))
        conn.execute(sa.text("INSERT INTO sa1 VALUES (2, 'alpha', 1.25), (3, 'beta', 0.10)"))
        conn.execute(sa.text("CREATE VIEW sa1_v AS SELECT id, name FROM sa1 WHERE amount > 1"))
        conn.execute(sa.text("COMMENT ON TABLE sa1 IS 'accounts'"))
        conn.execute(sa.text("COMMENT ON COLUMN sa1.name IS 'holder'"))
    insp = sa.inspect(engine)
    assert "public" in insp.get_schema_names(), insp.get_schema_names()
    assert insp.get_table_names() == ["sa1"], insp.get_table_names()
    assert insp.get_view_names() == ["sa1_v"], insp.get_view_names()
    assert "amount > 1" in insp.get_view_definition("sa1_v"), insp.get_view_definition("sa1_v")
    assert [c["name"] for c in insp.get_columns("sa1_v")] == ["id", "name"], insp.get_columns("sa1_v")
    assert insp.get_materialized_view_names() == ["sa1_mv"], insp.get_materialized_view_names()
    definition = insp.get_view_definition("sa1_mv")
    assert "count(*) AS n" in definition and "GROUP BY name" in definition, definition
    pk = insp.get_pk_constraint("sa1")
    assert pk["constrained_columns"] == ["id"], pk
    assert insp.get_table_comment("sa1") == {"text": "accounts"}, insp.get_table_comment("sa1")
    cols = insp.get_columns("sa1")
    assert [c["comment"] for c in cols] == [None, "holder", None], cols
    assert [c["name"] for c in cols] == ["id", "name", "amount"], cols
    assert [c["nullable"] for c in cols] == [False, False, True], cols
    assert isinstance(cols[0]["type"], sa.INTEGER) and isinstance(cols[1]["type"], sa.VARCHAR), cols
    assert cols[1]["type"].length == 20 and (cols[2]["type"].precision, cols[2]["type"].scale) == (10, 2), cols
    mv_cols = insp.get_columns("sa1_mv")
    assert [c["name"] for c in mv_cols] == ["name", "n", "total"], mv_cols
    assert isinstance(mv_cols[1]["type"], sa.BIGINT), mv_cols
    # Reflection as an application does it (columns, keys, indexes, comments, table options).
    reflected = sa.Table("sa1", sa.MetaData(), autoload_with=engine)
    assert list(reflected.c.keys()) == ["id", "name", "amount"], reflected.c.keys()
    assert [c.name for c in reflected.primary_key] == ["id"], reflected.primary_key
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT id, name, amount FROM sa1 WHERE id = :id"), {"id": 1}).one()
        assert row == (1, "alpha", decimal.Decimal("12.50")), row
        rows = conn.execute(sa.text("SELECT name, n, total FROM sa1_mv ORDER BY name")).all()
        assert rows == [("alpha", 2, decimal.Decimal("13.75")), ("beta", 1, decimal.Decimal("0.10"))], rows
        assert isinstance(rows[0][1], int) and isinstance(rows[0][2], decimal.Decimal), rows
    print("sqlalchemy ok")


def run_asyncpg():
    import asyncpg

    async def main():
        conn = await asyncpg.connect(host=HOST, port=PORT, user="root", database="dev")
        await conn.execute("CREATE TABLE apg (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), ts TIMESTAMPTZ)")
        await conn.execute(mv_sql("apg_mv", "apg"))
        await conn.execute("INSERT INTO apg VALUES ($1, $2, $3, $4)", 1, "alpha", decimal.Decimal("12.50"), TS)
        await conn.executemany("INSERT INTO apg VALUES ($1, $2, $3, $4)", MORE_ROWS)
        row = await conn.fetchrow("SELECT id, name, amount, ts FROM apg WHERE id = $1", 1)
        check_row(tuple(row), "asyncpg")
        rows = await conn.fetch("SELECT name, n, total, last_ts FROM apg_mv WHERE total > $1", decimal.Decimal("0"))
        check_mv_rows(rows, "asyncpg mv")
        # Arrays arrive in PostgreSQL's binary array format (asyncpg asks for binary results).
        assert await conn.fetchval("SELECT current_schemas(true)") == ["pg_catalog", "public"]
        assert await conn.fetchval("SELECT make_array('a', NULL, 'b c')") == ["a", None, "b c"]
        # Arrays of other element types make asyncpg introspect their types through pg_type
        # (a recursive query with an oid[] parameter) before it can decode them.
        assert await conn.fetchval("SELECT make_array(1, NULL, 3)") == [1, None, 3]
        assert await conn.fetchval("SELECT array_agg(id ORDER BY id) FROM apg") == [1, 2, 3]
        assert await conn.fetchval("SELECT ARRAY[true, false]") == [True, False]
        assert await conn.fetchval("SELECT ARRAY['2024-01-02'::date]") == [datetime.date(2024, 1, 2)]
        assert await conn.fetchval("SELECT array_agg(amount ORDER BY id) FROM apg") == [
            decimal.Decimal("12.50"), decimal.Decimal("1.25"), decimal.Decimal("0.10")]
        assert await conn.fetchval("SELECT $1::int8[]", [5, None]) == [5, None]
        assert await conn.fetchval("SELECT cardinality($1::text[])", ["x", "y"]) == 2
        # Array columns: written from binary list parameters, read back as lists, aggregated
        # into an array by a view.
        await conn.execute("CREATE TABLE apg_arr (id INT PRIMARY KEY, xs INT[], tags TEXT[])")
        await conn.execute("CREATE MATERIALIZED VIEW apg_arr_mv AS SELECT array_agg(id ORDER BY id DESC) AS ids FROM apg_arr")
        await conn.executemany("INSERT INTO apg_arr VALUES ($1, $2, $3)", [(1, [1, None, 3], ["a", "b c"]), (2, [], None)])
        rows = await conn.fetch("SELECT xs, tags FROM apg_arr ORDER BY id")
        assert [tuple(r) for r in rows] == [([1, None, 3], ["a", "b c"]), ([], None)], rows
        assert await conn.fetchval("SELECT ids FROM apg_arr_mv") == [2, 1]
        # uuid results in binary format. (Parameters are described by their Arrow type, so a
        # uuid parameter is text to asyncpg and is passed as a string.)
        import uuid
        await conn.execute("CREATE TABLE apg_uuid (id UUID PRIMARY KEY)")
        u = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
        await conn.execute("INSERT INTO apg_uuid VALUES ($1)", str(u).upper())
        assert await conn.fetchval("SELECT id FROM apg_uuid WHERE id = $1", str(u)) == u
        assert await conn.fetchval("SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid") == u
        await conn.close()

    asyncio.run(main())
    print("asyncpg ok")


def run_protocol():
    """Protocol details seen through psycopg 3: the transaction status byte of ReadyForQuery
    (I/T/E), DEALLOCATE [ALL], DISCARD ALL, RESET ALL, LISTEN/UNLISTEN."""
    import psycopg
    from psycopg import errors, pq

    TS = pq.TransactionStatus
    with psycopg.connect(DSN) as conn:  # not autocommit: psycopg sends BEGIN first
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        conn.execute("SELECT 1")
        assert conn.info.transaction_status == TS.INTRANS, conn.info.transaction_status
        try:
            conn.execute("SELECT * FROM no_such_table")
            raise AssertionError("expected an error")
        except errors.UndefinedTable:
            pass
        assert conn.info.transaction_status == TS.INERROR, conn.info.transaction_status
        # A failed block refuses further statements until it ends (25P02).
        try:
            conn.execute("SELECT 1")
            raise AssertionError("expected 25P02")
        except errors.InFailedSqlTransaction:
            pass
        assert conn.info.transaction_status == TS.INERROR, conn.info.transaction_status
        conn.rollback()
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        conn.execute("SELECT 1")
        conn.commit()
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        # COMMIT of a failed block rolls it back.
        conn.execute("SELECT 1")
        try:
            conn.execute("SELECT 1/0")
        except errors.DivisionByZero:
            pass
        cur = conn.execute("COMMIT")
        assert cur.statusmessage == "ROLLBACK", cur.statusmessage
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        # Nested transaction() blocks are savepoints; an error inside one rolls back to it and
        # the outer block carries on.
        with conn.transaction():
            conn.execute("SELECT 1")
            try:
                with conn.transaction():
                    conn.execute("SELECT * FROM no_such_table")
            except errors.UndefinedTable:
                pass
            assert conn.info.transaction_status == TS.INTRANS, conn.info.transaction_status
            assert conn.execute("SELECT 2").fetchone() == (2,)
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        conn.execute("BEGIN")
        try:
            conn.execute("ROLLBACK TO SAVEPOINT nope")
            raise AssertionError("expected 3B001")
        except errors.InvalidSavepointSpecification:
            pass
        conn.rollback()

    with psycopg.connect(DSN, autocommit=True) as conn:
        # An error outside a transaction block leaves the session idle.
        try:
            conn.execute("SELECT 1/0")
            raise AssertionError("expected an error")
        except errors.DivisionByZero:
            pass
        assert conn.info.transaction_status == TS.IDLE, conn.info.transaction_status
        conn.execute("BEGIN")
        assert conn.info.transaction_status == TS.INTRANS
        conn.execute("COMMIT")
        assert conn.info.transaction_status == TS.IDLE

        # DEALLOCATE removes a named statement; a second DEALLOCATE is 26000.
        pg = conn.pgconn
        for name in (b"st_a", b"st_b", b"st_c"):
            res = pg.prepare(name, b"SELECT 41 + 1")
            assert res.status == pq.ExecStatus.COMMAND_OK, res.error_message
        res = pg.exec_prepared(b"st_a", [])
        assert res.status == pq.ExecStatus.TUPLES_OK and res.get_value(0, 0) == b"42", res.error_message
        assert conn.execute("DEALLOCATE st_a").statusmessage == "DEALLOCATE"
        try:
            conn.execute("DEALLOCATE st_a")
            raise AssertionError("expected an error")
        except errors.InvalidSqlStatementName:
            pass
        res = pg.exec_prepared(b"st_a", [])
        assert res.status == pq.ExecStatus.FATAL_ERROR, res.status
        res = pg.exec_prepared(b"st_b", [])
        assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
        assert conn.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
        for name in (b"st_b", b"st_c"):
            assert pg.exec_prepared(name, []).status == pq.ExecStatus.FATAL_ERROR, name
        # DISCARD ALL drops prepared statements and settings.
        assert pg.prepare(b"st_d", b"SELECT 1").status == pq.ExecStatus.COMMAND_OK
        conn.execute("SET application_name = 'before'")
        assert conn.execute("DISCARD ALL").statusmessage == "DISCARD ALL"
        assert pg.exec_prepared(b"st_d", []).status == pq.ExecStatus.FATAL_ERROR
        assert conn.execute("SHOW application_name").fetchone() == ("",)
        # RESET ALL / RESET x restore defaults.
        default_digits = conn.execute("SHOW extra_float_digits").fetchone()
        conn.execute("SET extra_float_digits = 0")
        conn.execute("SET application_name = 'x'")
        assert conn.execute("RESET ALL").statusmessage == "RESET"
        assert conn.execute("SHOW extra_float_digits").fetchone() == default_digits
        assert conn.execute("SHOW application_name").fetchone() == ("",)
        # LISTEN / UNLISTEN are accepted (no notifications are ever sent).
        assert conn.execute("LISTEN chan").statusmessage == "LISTEN"
        assert conn.execute("UNLISTEN chan").statusmessage == "UNLISTEN"
        assert conn.execute("UNLISTEN *").statusmessage == "UNLISTEN"
        # psycopg's own prepared-statement cache follows DEALLOCATE ALL: it watches the command
        # tag, but only of a statement text it has not run before (hence the lower case here).
        for _ in range(3):
            assert conn.execute("SELECT %s::int + 1", (1,), prepare=True).fetchone() == (2,)
        conn.execute("deallocate all")
        assert conn.execute("SELECT %s::int + 1", (1,), prepare=True).fetchone() == (2,)
    print("protocol ok")


RUNNERS = {"protocol": run_protocol, "psycopg": run_psycopg, "psycopg2": run_psycopg2, "sqlalchemy": run_sqlalchemy, "asyncpg": run_asyncpg}

if __name__ == "__main__":
    for name in sys.argv[3:]:
        module = {"protocol": "psycopg"}.get(name, name)
        if importlib.util.find_spec(module) is None:
            print(f"missing python module {module}")
            sys.exit(3)
        RUNNERS[name]()
