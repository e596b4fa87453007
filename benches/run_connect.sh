#!/usr/bin/env bash
# Connection setup to first row for psycopg 3 and pgjdbc (issue 4) against a fresh release eddy.
# Usage: benches/run_connect.sh [path/to/eddy]   (default: $CARGO_TARGET_DIR or target, release/eddy)
set -euo pipefail
cd "$(dirname "$0")/.."
EDDY=${1:-${CARGO_TARGET_DIR:-target}/release/eddy}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d /tmp/eddy-bench-connect-XXXXXX)
"$EDDY" --listen 127.0.0.1:$PORT --state-store file://$DIR >"$DIR.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR" "$DIR.log"' EXIT
for _ in $(seq 600); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null && break
  sleep 0.1
done
echo "eddy pid $PID port $PORT state-store file://$DIR ($(nproc) cores)"
python3 benches/bench_connect.py $PORT
JAR=/usr/share/java/postgresql.jar
if command -v javac >/dev/null && [ -f $JAR ]; then
  OUT=$(mktemp -d /tmp/bench-jdbc-XXXXXX)
  javac -d "$OUT" -cp $JAR benches/jdbc/BenchConnect.java
  java -cp "$OUT:$JAR" BenchConnect $PORT 100
  rm -rf "$OUT"
else
  echo "skipping JDBC: needs javac and $JAR (apt-get install libpostgresql-jdbc-java default-jdk-headless)"
fi
grep -E '^(VmHWM|VmRSS)' /proc/$PID/status
