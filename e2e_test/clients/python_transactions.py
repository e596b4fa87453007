"""Transaction blocks through real Python drivers, with materialized views reading the tables.

Usage: python3 python_transactions.py HOST PORT DRIVER...   (DRIVER: psycopg sqlalchemy)

Each driver gets its own table and two materialized views over it (a global aggregate and a
GROUP BY), then runs commits, rollbacks, savepoints (rolled back to and released) and failed
blocks (an error then ROLLBACK, psycopg's `with conn.transaction()` leaving by an exception,
a SQLAlchemy session rolled back after an error). After every step the table and both views
must equal exactly what the committed writes imply, as tracked by a Python model; a second
connection must never see a block's writes before its COMMIT. Prints "<driver> transactions
ok". A missing driver module exits with status 3 so the caller can skip.
"""
import importlib.util
import sys

HOST, PORT = sys.argv[1], int(sys.argv[2])
DSN = f"host={HOST} port={PORT} user=root dbname=dev"
URL_DB = f"root@{HOST}:{PORT}/dev"


def setup_sql(table):
    return [
        f"CREATE TABLE {table} (id INT PRIMARY KEY, owner TEXT NOT NULL, balance BIGINT NOT NULL)",
        f"CREATE MATERIALIZED VIEW {table}_total AS SELECT count(*) AS n, sum(balance) AS s FROM {table}",
        f"CREATE MATERIALIZED VIEW {table}_by_owner AS SELECT owner, count(*) AS n, sum(balance) AS s "
        f"FROM {table} GROUP BY owner",
    ]


class Model:
    """The committed contents of one table: id -> (owner, balance)."""

    def __init__(self):
        self.rows = {}

    def expected(self):
        rows = sorted((i, o, b) for i, (o, b) in self.rows.items())
        total = (len(rows), sum(b for _, _, b in rows) if rows else None)
        owners = {}
        for _, o, b in rows:
            n, s = owners.get(o, (0, 0))
            owners[o] = (n + 1, s + b)
        by_owner = sorted((o, n, s) for o, (n, s) in owners.items())
        return rows, total, by_owner


def check(query, table, model, label):
    """`query(sql)` returns a list of tuples; compares the table and its views with the model."""
    rows, total, by_owner = model.expected()
    got_rows = sorted(tuple(r) for r in query(f"SELECT id, owner, balance FROM {table}"))
    assert got_rows == rows, (label, "table", got_rows, rows)
    got_total = [tuple(r) for r in query(f"SELECT n, s FROM {table}_total")]
    assert got_total == [total], (label, "total view", got_total, total)
    got_by_owner = sorted(tuple(r) for r in query(f"SELECT owner, n, s FROM {table}_by_owner"))
    assert got_by_owner == by_owner, (label, "by-owner view", got_by_owner, by_owner)
    for view in (f"{table}_total", f"{table}_by_owner"):
        verdict = [tuple(r) for r in query(f"VERIFY MATERIALIZED VIEW {view}")]
        assert verdict == [("OK",)], (label, view, verdict)


class Boom(Exception):
    """An application error that makes a transaction block roll back."""


def run_psycopg():
    import psycopg
    from psycopg import errors

    t = "ptx"
    model = Model()
    observer = psycopg.connect(DSN, autocommit=True)

    def observe(sql):
        return observer.execute(sql).fetchall()

    for sql in setup_sql(t):
        observer.execute(sql)
    check(observe, t, model, "empty")

    with psycopg.connect(DSN) as conn:  # not autocommit: psycopg opens a block per statement group
        # Commit: several writes, read back inside the block, invisible outside until COMMIT.
        conn.execute(f"INSERT INTO {t} VALUES (1, 'ann', 100), (2, 'bob', 50)")
        conn.execute(f"UPDATE {t} SET balance = balance - 30 WHERE id = 1")
        conn.execute(f"INSERT INTO {t} VALUES (3, 'ann', 5)")
        assert conn.execute(f"SELECT sum(balance) FROM {t}").fetchone() == (125,)
        check(observe, t, model, "before the first commit")
        conn.commit()
        model.rows.update({1: ("ann", 70), 2: ("bob", 50), 3: ("ann", 5)})
        check(observe, t, model, "commit")

        # Rollback: nothing of the block is applied.
        conn.execute(f"DELETE FROM {t} WHERE id = 2")
        conn.execute(f"INSERT INTO {t} VALUES (4, 'cy', 7)")
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone() == (3,)
        conn.rollback()
        check(observe, t, model, "rollback")

        # SQL savepoints: ROLLBACK TO drops the writes after it; RELEASE keeps them.
        conn.execute(f"INSERT INTO {t} VALUES (4, 'cy', 7)")
        conn.execute("SAVEPOINT a")
        conn.execute(f"UPDATE {t} SET balance = 0")
        conn.execute(f"INSERT INTO {t} VALUES (5, 'dee', 9)")
        assert conn.execute(f"SELECT sum(balance) FROM {t}").fetchone() == (9,)
        conn.execute("ROLLBACK TO SAVEPOINT a")
        assert conn.execute(f"SELECT sum(balance) FROM {t}").fetchone() == (132,)
        conn.execute("SAVEPOINT b")
        conn.execute(f"UPDATE {t} SET owner = 'bea' WHERE id = 2")
        conn.execute("RELEASE SAVEPOINT b")
        conn.commit()
        model.rows[4] = ("cy", 7)
        model.rows[2] = ("bea", 50)
        check(observe, t, model, "savepoints")

        # A failed block: a duplicate key (23505) then ROLLBACK; the block's earlier writes go too.
        conn.execute(f"INSERT INTO {t} VALUES (6, 'eve', 1)")
        try:
            conn.execute(f"INSERT INTO {t} VALUES (1, 'dup', 1)")
            raise AssertionError("expected a unique violation")
        except errors.UniqueViolation:
            pass
        try:
            conn.execute("SELECT 1")
            raise AssertionError("expected 25P02 in a failed block")
        except errors.InFailedSqlTransaction:
            pass
        conn.rollback()
        check(observe, t, model, "failed block")

        # COMMIT of a failed block is a ROLLBACK.
        conn.execute(f"UPDATE {t} SET balance = balance + 1000 WHERE id = 3")
        try:
            conn.execute("SELECT 1 / 0")
            raise AssertionError("expected division by zero")
        except errors.DivisionByZero:
            pass
        cur = conn.execute("COMMIT")
        assert cur.statusmessage == "ROLLBACK", cur.statusmessage
        check(observe, t, model, "commit of a failed block")

    with psycopg.connect(DSN, autocommit=True) as conn:
        # `with conn.transaction()` commits on success ...
        with conn.transaction():
            conn.execute(f"INSERT INTO {t} VALUES (7, 'fay', 11)")
            conn.execute(f"UPDATE {t} SET balance = balance * 2 WHERE owner = 'ann'")
        model.rows[7] = ("fay", 11)
        model.rows[1] = ("ann", 140)
        model.rows[3] = ("ann", 10)
        check(observe, t, model, "transaction() committed")

        # ... and rolls back when the block raises, whether the error is the database's ...
        try:
            with conn.transaction():
                conn.execute(f"DELETE FROM {t} WHERE id = 7")
                conn.execute(f"INSERT INTO {t} VALUES (2, 'dup', 0)")
            raise AssertionError("expected a unique violation")
        except errors.UniqueViolation:
            pass
        check(observe, t, model, "transaction() rolled back by a database error")

        # ... or the application's.
        try:
            with conn.transaction():
                conn.execute(f"INSERT INTO {t} VALUES (8, 'gus', 3)")
                conn.execute(f"UPDATE {t} SET balance = 0 WHERE id = 1")
                raise Boom()
        except Boom:
            pass
        check(observe, t, model, "transaction() rolled back by an application error")

        # Nested transaction() blocks are savepoints: the inner one rolls back alone.
        with conn.transaction():
            conn.execute(f"INSERT INTO {t} VALUES (8, 'gus', 3)")
            try:
                with conn.transaction():
                    conn.execute(f"UPDATE {t} SET balance = -1 WHERE id = 8")
                    conn.execute(f"DELETE FROM {t} WHERE id = 1")
                    raise Boom()
            except Boom:
                pass
            assert conn.execute(f"SELECT balance FROM {t} WHERE id = 8").fetchone() == (3,)
            with conn.transaction():
                conn.execute(f"UPDATE {t} SET balance = balance + 1 WHERE id = 8")
        model.rows[8] = ("gus", 4)
        check(observe, t, model, "nested transaction()")

        # Autocommit statements outside blocks still apply one by one.
        conn.execute(f"DELETE FROM {t} WHERE owner = 'ann'")
        del model.rows[1]
        del model.rows[3]
        check(observe, t, model, "autocommit")
    observer.close()
    print("psycopg transactions ok")


def run_sqlalchemy():
    import sqlalchemy as sa
    from sqlalchemy import exc
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    t = "satx"
    model = Model()
    engine = sa.create_engine(f"postgresql+psycopg://{URL_DB}")

    def observe(sql):
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql)).all()]

    with engine.begin() as conn:
        for sql in setup_sql(t):
            conn.execute(sa.text(sql))

    class Base(DeclarativeBase):
        pass

    class Account(Base):
        __tablename__ = t
        id: Mapped[int] = mapped_column(primary_key=True)
        owner: Mapped[str]
        balance: Mapped[int] = mapped_column(sa.BigInteger)

    check(observe, t, model, "empty")

    # ORM unit of work: add, flush (the block reads its own rows), commit.
    with Session(engine) as s:
        s.add_all([Account(id=1, owner="ann", balance=100), Account(id=2, owner="bob", balance=50)])
        s.flush()
        assert s.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() == 2
        check(observe, t, model, "flushed, not committed")
        acct = s.get(Account, 1)
        acct.balance -= 25
        s.commit()
    model.rows.update({1: ("ann", 75), 2: ("bob", 50)})
    check(observe, t, model, "session commit")

    # session.rollback() drops flushed changes.
    with Session(engine) as s:
        s.add(Account(id=3, owner="cy", balance=9))
        s.get(Account, 2).owner = "bea"
        s.flush()
        s.rollback()
    check(observe, t, model, "session rollback")

    # An error in a flush fails the block; the session must be rolled back, then works again.
    with Session(engine) as s:
        s.add(Account(id=4, owner="dee", balance=4))
        s.flush()
        s.add(Account(id=1, owner="dup", balance=0))
        try:
            s.flush()
            raise AssertionError("expected an IntegrityError")
        except exc.IntegrityError:
            s.rollback()
        check(observe, t, model, "session rolled back after an error")
        s.add(Account(id=5, owner="eve", balance=5))
        s.commit()
    model.rows[5] = ("eve", 5)
    check(observe, t, model, "session usable after its rollback")

    # `with session.begin()` commits on success and rolls back on an exception.
    with Session(engine) as s:
        with s.begin():
            s.execute(sa.text(f"UPDATE {t} SET balance = balance + 1"))
        for i in list(model.rows):
            o, b = model.rows[i]
            model.rows[i] = (o, b + 1)
        check(observe, t, model, "session.begin() committed")
        try:
            with s.begin():
                s.execute(sa.text(f"DELETE FROM {t}"))
                raise Boom()
        except Boom:
            pass
        check(observe, t, model, "session.begin() rolled back")

    # begin_nested(): savepoints; the inner one rolls back, the outer commits.
    with Session(engine) as s:
        with s.begin():
            s.add(Account(id=6, owner="fay", balance=6))
            s.flush()
            try:
                with s.begin_nested():
                    s.add(Account(id=7, owner="gus", balance=7))
                    s.flush()
                    s.execute(sa.text(f"UPDATE {t} SET balance = 0 WHERE id = 6"))
                    raise Boom()
            except Boom:
                pass
            assert s.execute(sa.text(f"SELECT balance FROM {t} WHERE id = 6")).scalar() == 6
            with s.begin_nested():
                s.add(Account(id=8, owner="hal", balance=8))
            nested_error = False
            try:
                with s.begin_nested():
                    s.add(Account(id=2, owner="dup", balance=0))
                    s.flush()
            except exc.IntegrityError:
                nested_error = True
            assert nested_error
    model.rows.update({6: ("fay", 6), 8: ("hal", 8)})
    check(observe, t, model, "nested savepoints")
    engine.dispose()
    print("sqlalchemy transactions ok")


RUNNERS = {"psycopg": run_psycopg, "sqlalchemy": run_sqlalchemy}
MODULES = {"psycopg": ["psycopg"], "sqlalchemy": ["sqlalchemy", "psycopg"]}

if __name__ == "__main__":
    for name in sys.argv[3:]:
        for module in MODULES[name]:
            if importlib.util.find_spec(module) is None:
                print(f"missing python module {module}")
                sys.exit(3)
        RUNNERS[name]()
