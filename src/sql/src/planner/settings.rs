//! Session settings vocabulary: canonical names, PostgreSQL's spellings in ParameterStatus, and
//! the defaults of a new session. Shared by the session functions (`current_setting`) and the
//! frontend's `SET`/`SHOW`.

use std::collections::BTreeMap;

/// PostgreSQL version Eddy reports (clients pick query shapes from it).
pub const PG_VERSION: &str = "15.0";

/// `server_version_num` matching [`PG_VERSION`].
pub const PG_VERSION_NUM: &str = "150000";

/// Settings reported to the client in ParameterStatus when they change.
pub const REPORTED: [&str; 8] =
    ["application_name", "client_encoding", "datestyle", "timezone", "intervalstyle", "standard_conforming_strings", "is_superuser", "server_version"];

/// PostgreSQL's spelling of a setting name in ParameterStatus.
pub fn display_var_name(name: &str) -> &str {
    match name {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

/// Lower-cased setting name, with PostgreSQL's aliases resolved.
pub fn canonical_var(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase().replace(' ', "_");
    match n.as_str() {
        "time_zone" => "timezone".into(),
        "transaction_isolation_level" => "transaction_isolation".into(),
        "session_authorization" => "session_authorization".into(),
        _ => n,
    }
}

/// Default settings of a new session.
pub fn default_vars(user: &str) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    for (k, val) in [
        ("application_name", ""),
        ("client_encoding", "UTF8"),
        ("server_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("timezone", "UTC"),
        ("intervalstyle", "postgres"),
        ("standard_conforming_strings", "on"),
        ("integer_datetimes", "on"),
        ("is_superuser", "on"),
        ("server_version", PG_VERSION),
        ("server_version_num", PG_VERSION_NUM),
        ("search_path", "\"$user\", public"),
        ("transaction_isolation", "read committed"),
        ("default_transaction_isolation", "read committed"),
        ("transaction_read_only", "off"),
        ("default_transaction_read_only", "off"),
        ("extra_float_digits", "1"),
        ("max_identifier_length", "63"),
        ("lc_collate", "C"),
        ("lc_ctype", "C"),
        ("lc_messages", "C"),
        ("lc_monetary", "C"),
        ("lc_numeric", "C"),
        ("lc_time", "C"),
        ("statement_timeout", "0"),
        ("lock_timeout", "0"),
        ("idle_in_transaction_session_timeout", "0"),
        ("bytea_output", "hex"),
        ("client_min_messages", "notice"),
        ("block_size", "8192"),
        ("max_connections", "100"),
        ("in_hot_standby", "off"),
        ("default_transaction_deferrable", "off"),
        ("row_security", "on"),
        ("synchronous_commit", "on"),
        ("jit", "off"),
        ("plan_cache_mode", "auto"),
        ("work_mem", "4MB"),
        ("default_table_access_method", "heap"),
        ("default_tablespace", ""),
        ("temp_tablespaces", ""),
        ("default_with_oids", "off"),
        ("escape_string_warning", "on"),
        ("wal_level", "replica"),
        ("max_index_keys", "32"),
        ("data_directory_mode", "0700"),
        ("barrier_interval", "250ms"),
        // Actors per fragment of a new materialized view; 0: one per core.
        ("streaming_parallelism", "0"),
        // CREATE MATERIALIZED VIEW returns once the view is subscribed; it is completed (and
        // resumed after a restart) in the background.
        ("background_ddl", "false"),
    ] {
        v.insert(k.to_string(), val.to_string());
    }
    v.insert("session_authorization".into(), user.to_string());
    v
}
