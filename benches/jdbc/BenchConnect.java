import java.sql.*;
import java.util.*;

/**
 * pgjdbc connection setup to first row (ms). Usage (against a running eddy):
 *   javac -d /tmp/bench-jdbc benches/jdbc/BenchConnect.java
 *   java -cp /tmp/bench-jdbc:/usr/share/java/postgresql.jar BenchConnect PORT [N]
 * Prints the first (cold JVM, class loading) connection and median/p99 over N warm connections.
 */
public class BenchConnect {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int n = args.length > 1 ? Integer.parseInt(args[1]) : 100;
        String url = "jdbc:postgresql://127.0.0.1:" + port + "/dev?user=root&sslmode=disable";
        double first = once(url);
        for (int i = 0; i < 20; i++) once(url); // JIT warm-up
        double[] t = new double[n];
        for (int i = 0; i < n; i++) t[i] = once(url);
        Arrays.sort(t);
        System.out.printf("pgjdbc %s connect-to-first-row: first (cold JVM) %.2f ms; warm over %d: median %.2f ms, p99 %.2f ms, min %.2f ms%n",
            org.postgresql.Driver.class.getPackage().getImplementationVersion(), first, n, t[n / 2], t[(int) Math.round(0.99 * (n - 1))], t[0]);
    }

    static double once(String url) throws Exception {
        long t0 = System.nanoTime();
        try (Connection c = DriverManager.getConnection(url);
             Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT 1")) {
            if (!rs.next()) throw new IllegalStateException("no row");
        }
        return (System.nanoTime() - t0) / 1e6;
    }
}
