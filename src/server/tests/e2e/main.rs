//! End-to-end tests over the PostgreSQL wire: the `.slt` suite in `e2e_test/`, restarts on the
//! same state directory, SIGKILL of a real `eddy` process (also mid-backfill, mid-COPY and
//! mid-DROP), internal faults in views, concurrent writers, real client drivers, randomized
//! differential checks, psql, and binary-format round trips.
//! One test binary for all of them (link time on 2 cores matters).

mod postgres;
mod process;
mod raw;
mod support;

mod background_ddl;
mod backfill;
mod binary_types;
mod blackhole;
mod concurrency;
mod crash;
mod crash_harness;
mod differential;
mod docker;
mod dashboard;
mod drivers;
mod durability;
mod failures;
mod fencing;
mod faults;
mod hostile;
mod http;
mod iceberg;
mod large_statements;
mod multisets;
mod kafka;
mod nexmark;
mod parallel;
mod postgres_sink;
mod point_query;
mod protocol;
mod psql;
mod recovery;
mod reduce;
mod replay;
mod resource_limits;
mod slt;
mod snapshot;
mod sources;
mod soak;
mod sql_mutation;
mod sqlfuzz;
mod subscribe;
mod temporal;
mod tls;
mod top_n;
mod wire_fuzz;
