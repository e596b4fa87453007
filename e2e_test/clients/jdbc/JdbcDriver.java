// pgjdbc (Debian's libpostgresql-jdbc-java) against an Eddy server: PreparedStatement insert and
// select with type checks on a table and a materialized view, server-side prepared statements
// after the prepare threshold, fetch-size portals inside a transaction, and DatabaseMetaData
// getSchemas/getTables/getColumns/getPrimaryKeys.
//
// Usage: java -cp /usr/share/java/postgresql.jar JdbcDriver.java HOST PORT
// Prints "jdbc ok" and exits 0 on success; throws (exit 1) on the first failed check.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public class JdbcDriver {
    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void checkEq(Object got, Object want, String what) {
        check(want.equals(got), what + ": got " + got + ", want " + want);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/dev";
        Properties props = new Properties();
        props.setProperty("user", "root");
        props.setProperty("prepareThreshold", "2");
        OffsetDateTime ts = OffsetDateTime.of(2024, 1, 2, 3, 4, 5, 0, ZoneOffset.UTC);
        try (Connection conn = DriverManager.getConnection(url, props)) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE jt (id INT PRIMARY KEY, name TEXT NOT NULL, amount NUMERIC(10,2), "
                        + "big BIGINT, ratio DOUBLE PRECISION, flag BOOLEAN, ts TIMESTAMPTZ)");
                st.execute("CREATE MATERIALIZED VIEW jt_mv AS SELECT name, count(*) AS n, sum(amount) AS total "
                        + "FROM jt GROUP BY name");
            }
            try (PreparedStatement ps = conn.prepareStatement("INSERT INTO jt VALUES (?, ?, ?, ?, ?, ?, ?)")) {
                for (int i = 1; i <= 5; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, i % 2 == 0 ? "even" : "odd");
                    ps.setBigDecimal(3, new BigDecimal("1.25").multiply(BigDecimal.valueOf(i)));
                    ps.setLong(4, 10_000_000_000L + i);
                    ps.setDouble(5, i / 4.0);
                    ps.setBoolean(6, i % 2 == 0);
                    ps.setObject(7, ts.plusDays(i));
                    checkEq(ps.executeUpdate(), 1, "insert count");
                }
            }
            // Several executions: pgjdbc switches to a named server-side statement (S_n).
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT id, name, amount, big, ratio, flag, ts FROM jt WHERE id = ?")) {
                for (int round = 0; round < 4; round++) {
                    ps.setInt(1, 2);
                    try (ResultSet rs = ps.executeQuery()) {
                        check(rs.next(), "row 2 exists");
                        checkEq(rs.getInt(1), 2, "id");
                        checkEq(rs.getString(2), "even", "name");
                        checkEq(rs.getBigDecimal(3), new BigDecimal("2.50"), "amount");
                        checkEq(rs.getLong(4), 10_000_000_002L, "big");
                        checkEq(rs.getDouble(5), 0.5, "ratio");
                        checkEq(rs.getBoolean(6), true, "flag");
                        checkEq(rs.getObject(7, OffsetDateTime.class).toInstant(), ts.plusDays(2).toInstant(), "ts");
                        checkEq(rs.getMetaData().getColumnType(1), Types.INTEGER, "int column type");
                        checkEq(rs.getMetaData().getColumnType(3), Types.NUMERIC, "numeric column type");
                        checkEq(rs.getMetaData().getColumnType(4), Types.BIGINT, "bigint column type");
                        checkEq(rs.getMetaData().getColumnTypeName(7), "timestamptz", "timestamptz type name");
                        check(!rs.next(), "one row");
                    }
                }
            }
            // The materialized view, through a prepared statement with a parameter.
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT name, n, total FROM jt_mv WHERE n >= ? ORDER BY name")) {
                ps.setLong(1, 1);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "even row");
                    checkEq(rs.getString(1), "even", "mv name");
                    checkEq(rs.getLong(2), 2L, "mv count");
                    checkEq(rs.getBigDecimal(3), new BigDecimal("7.50"), "mv sum");
                    checkEq(rs.getMetaData().getColumnType(2), Types.BIGINT, "count type");
                    check(rs.next(), "odd row");
                    checkEq(rs.getString(1), "odd", "mv name");
                    checkEq(rs.getLong(2), 3L, "mv count");
                    checkEq(rs.getBigDecimal(3), new BigDecimal("11.25"), "mv sum");
                    check(!rs.next(), "two view rows");
                }
            }
            // setFetchSize inside a transaction: Execute with max_rows, PortalSuspended, Execute again.
            conn.setAutoCommit(false);
            try (PreparedStatement ps = conn.prepareStatement("SELECT id FROM jt ORDER BY id")) {
                ps.setFetchSize(2);
                List<Integer> ids = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        ids.add(rs.getInt(1));
                    }
                }
                checkEq(ids, List.of(1, 2, 3, 4, 5), "fetch-size rows");
            }
            conn.commit();
            conn.setAutoCommit(true);

            DatabaseMetaData md = conn.getMetaData();
            check(md.getDatabaseProductVersion().startsWith("15"), "version " + md.getDatabaseProductVersion());
            List<String> schemas = new ArrayList<>();
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) {
                    schemas.add(rs.getString("TABLE_SCHEM"));
                }
            }
            check(schemas.contains("public") && schemas.contains("pg_catalog"), "schemas " + schemas);
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE", "VIEW", "MATERIALIZED VIEW"})) {
                while (rs.next()) {
                    tables.add(rs.getString("TABLE_NAME") + ":" + rs.getString("TABLE_TYPE"));
                }
            }
            // Ordered by TABLE_TYPE, then name, like PostgreSQL.
            checkEq(tables, List.of("jt_mv:MATERIALIZED VIEW", "jt:TABLE"), "getTables");
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "public", "jt", "%")) {
                while (rs.next()) {
                    cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME") + ":"
                            + rs.getInt("DATA_TYPE") + ":" + rs.getString("IS_NULLABLE"));
                }
            }
            checkEq(cols, List.of("id:int4:4:NO", "name:text:12:NO", "amount:numeric:2:YES", "big:int8:-5:YES",
                    "ratio:float8:8:YES", "flag:bool:-7:YES", "ts:timestamptz:93:YES"), "getColumns");
            try (ResultSet rs = md.getColumns(null, "public", "jt_mv", "%")) {
                cols.clear();
                while (rs.next()) {
                    cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
                }
            }
            checkEq(cols, List.of("name:text", "n:int8", "total:numeric"), "getColumns on the view");
            List<String> pk = new ArrayList<>();
            try (ResultSet rs = md.getPrimaryKeys(null, "public", "jt")) {
                while (rs.next()) {
                    pk.add(rs.getString("COLUMN_NAME") + ":" + rs.getInt("KEY_SEQ"));
                }
            }
            checkEq(pk, List.of("id:1"), "getPrimaryKeys");
        }
        System.out.println("jdbc ok");
    }
}
