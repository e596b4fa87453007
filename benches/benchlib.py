"""Helpers shared by the Python benchmark scripts: a server process's memory, and loading
generated rows with COPY in statements of a given size."""
import io


def status_mib(pid, field):
    """A `/proc/PID/status` field in MiB (`VmRSS`, `VmHWM`), 0 if missing."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


def copy_rows(conn, table, rows, step, line, after=None):
    """COPYs rows 0..rows into `table`, `step` per statement, each row's text `line(i)`
    (tab-separated, newline-terminated); calls `after(done)` after each statement."""
    for lo in range(0, rows, step):
        buf = io.StringIO()
        for i in range(lo, min(lo + step, rows)):
            buf.write(line(i))
        with conn.cursor().copy(f"COPY {table} FROM STDIN") as copy:
            copy.write(buf.getvalue())
        if after:
            after(min(lo + step, rows))
