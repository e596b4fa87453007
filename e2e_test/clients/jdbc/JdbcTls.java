// pgjdbc over TLS: connects with sslmode=require (encryption, no certificate verification, as
// libpq's require), runs a query, and checks that the same URL is refused by a server without
// TLS when one is given.
//
// Usage: java -cp /usr/share/java/postgresql.jar JdbcTls.java HOST PORT [PLAIN_PORT]
// Prints "jdbc tls ok" and exits 0 on success; throws (exit 1) on the first failed check.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class JdbcTls {
    static Connection open(String host, String port) throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", "root");
        p.setProperty("sslmode", "require");
        return DriverManager.getConnection("jdbc:postgresql://" + host + ":" + port + "/dev", p);
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = open(args[0], args[1]); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE tls_t (id INT PRIMARY KEY, v TEXT)");
            s.execute("INSERT INTO tls_t VALUES (1, 'over tls')");
            try (ResultSet r = s.executeQuery("SELECT v FROM tls_t WHERE id = 1")) {
                if (!r.next() || !r.getString(1).equals("over tls")) {
                    throw new AssertionError("the row did not come back over TLS");
                }
            }
        }
        if (args.length > 2) {
            try (Connection c = open(args[0], args[2])) {
                throw new AssertionError("sslmode=require connected to a server without TLS");
            } catch (SQLException e) {
                // Refused, as it must be.
            }
        }
        System.out.println("jdbc tls ok");
    }
}
