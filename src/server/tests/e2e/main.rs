//! End-to-end tests over the PostgreSQL wire: the `.slt` suite in `e2e_test/`, restarts on the
//! same state directory, SIGKILL of a real `eddy` process, psql, binary-format round trips, and
//! hostile clients (issue 10): crashes, resource limits, wire fuzzing, TLS and authentication.
//! One test binary for all of them (link time on 2 cores matters).

mod process;
mod raw;
mod support;

mod binary_types;
mod differential;
mod drivers;
mod durability;
mod hostile;
mod protocol;
mod psql;
mod replay;
mod resource_limits;
mod slt;
mod wire_fuzz;
