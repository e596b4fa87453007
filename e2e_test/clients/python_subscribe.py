"""A psycopg 3 app following a materialized view with SUBSCRIBE, as Materialize documents it.

Usage: python3 python_subscribe.py HOST PORT

1. `DECLARE c CURSOR FOR SUBSCRIBE v WITH (PROGRESS)` in a transaction, then `FETCH ALL c WITH
   (timeout = ...)` in a loop: after each write by another connection, the changes accumulated
   up to a progress row equal the view as a plain SELECT reads it.
2. `cursor.stream("SUBSCRIBE ...")`: rows arrive one by one as they are committed; closing the
   generator cancels the statement and the connection stays usable.
3. psycopg's server-side cursors (`conn.cursor(name=...)`: DECLARE through the extended
   protocol, DescribePortal of the cursor, FETCH FORWARD n, CLOSE), with a parameter, and
   WITH HOLD across a commit.
Prints "psycopg subscribe ok". A missing psycopg exits with status 3 so the caller can skip.
"""
import sys

try:
    import psycopg
except ImportError:
    print("psycopg is not installed")
    sys.exit(3)

HOST, PORT = sys.argv[1], int(sys.argv[2])
DSN = f"host={HOST} port={PORT} user=root dbname=dev"


def view_rows(conn):
    return sorted(conn.execute("SELECT name, n FROM sub_v").fetchall())


def main():
    with psycopg.connect(DSN, autocommit=True) as w, psycopg.connect(DSN) as r:
        w.execute("CREATE TABLE sub_t (id INT PRIMARY KEY, name TEXT)")
        w.execute("INSERT INTO sub_t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
        w.execute("CREATE MATERIALIZED VIEW sub_v AS SELECT name, count(*) AS n FROM sub_t GROUP BY name")
        state = {}
        with r.cursor() as cur:
            cur.execute("DECLARE c CURSOR FOR SUBSCRIBE sub_v WITH (PROGRESS)")

            def until(expected):
                for _ in range(1000):
                    cur.execute("FETCH ALL c WITH (timeout = '60s')")
                    for ts, progressed, diff, name, n in cur.fetchall():
                        if progressed:
                            now = sorted(k for k, c in state.items() if c != 0)
                            if now == expected:
                                return
                            continue
                        assert diff in (1, -1), diff
                        state[(name, n)] = state.get((name, n), 0) + diff
                raise AssertionError(f"never reached {expected}; have {state}")

            until(view_rows(w))
            for sql in [
                "INSERT INTO sub_t VALUES (4, 'c')",
                "UPDATE sub_t SET name = 'b' WHERE id = 1",
                "DELETE FROM sub_t WHERE name = 'a'",
                "INSERT INTO sub_t VALUES (5, 'a'), (6, 'a'), (7, 'd')",
            ]:
                w.execute(sql)
                until(view_rows(w))
        r.rollback()

        with psycopg.connect(DSN, autocommit=True) as s:
            cur = s.cursor()
            rows = cur.stream("SUBSCRIBE sub_t")
            # The generator sends the statement on its first row: the snapshot's.
            first_ts = next(rows)[0]
            w.execute("INSERT INTO sub_t VALUES (8, 'e')")
            for ts, diff, ident, name in rows:
                if ident == 8:
                    assert (diff, name) == (1, "e") and ts > first_ts, (ts, diff, name, first_ts)
                    break
            rows.close()
            assert s.execute("SELECT count(*) FROM sub_t").fetchone()[0] == 7
    with psycopg.connect(DSN) as c:
        with c.cursor(name="big cursor") as cur:
            cur.itersize = 3
            cur.execute("SELECT id, name FROM sub_t ORDER BY id")
            assert [d.name for d in cur.description] == ["id", "name"], cur.description
            rows = list(cur)
            assert [r[0] for r in rows] == [1, 2, 4, 5, 6, 7, 8], rows
            cur.execute("SELECT id FROM sub_t WHERE id <= %s ORDER BY id", (4,))
            assert cur.fetchmany(2) == [(1,), (2,)]
            assert cur.fetchall() == [(4,)]
        c.commit()
        with c.cursor(name="held", withhold=True) as cur:
            cur.execute("SELECT count(*) FROM sub_t")
            c.commit()
            assert cur.fetchone() == (7,)
    print("psycopg subscribe ok")


main()
