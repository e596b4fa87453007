//! `eddy`: a streaming SQL database that speaks the PostgreSQL protocol.

use std::path::PathBuf;

/// mimalloc returns freed pages to the system within milliseconds and keeps per-thread heaps
/// without glibc's per-arena fragmentation (see benches/README.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use eddy_server::config::{ConfigOverrides, ServerConfig};

/// Command line. Flags win over `EDDY_*` variables, which win over the `--config` file.
#[derive(Parser, Debug)]
#[command(name = "eddy", version, about = "Eddy: streaming SQL over the PostgreSQL protocol")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML config file with the same keys as the flags (listen, state_store, ...).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Address for PostgreSQL clients.
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Address of the HTTP server: dashboard at /, Prometheus metrics at /metrics, JSON API
    /// under /api/. Default 127.0.0.1:5691; `off` disables it.
    #[arg(long, global = true)]
    http: Option<String>,
    /// State store URL: file:///path, s3://bucket/prefix or memory://.
    #[arg(long, global = true)]
    state_store: Option<String>,
    /// Require this password (SCRAM-SHA-256) instead of trusting every client.
    #[arg(long, global = true)]
    password: Option<String>,
    /// Milliseconds between barriers when no DML asks for an early one.
    #[arg(long, global = true)]
    barrier_interval_ms: Option<u64>,
    /// Block cache size in MiB. Default: a sixteenth of --memory-mb.
    #[arg(long, global = true)]
    block_cache_mb: Option<u64>,
    /// Local directory for the block cache's disk part: SST blocks evicted from memory are
    /// kept there and read back before the object store is asked (useful with S3). It
    /// survives restarts. Default: none (memory only).
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    /// Size of the block cache's disk part in MiB (with --cache-dir). Default 1024.
    #[arg(long, global = true)]
    cache_disk_mb: Option<u64>,
    /// Memory budget of the state layers in MiB: operators' state caches get half, the block
    /// cache a sixteenth, uncommitted writes and SlateDB's write buffers a sixty-fourth each;
    /// the rest is headroom. Default 1024.
    #[arg(long, global = true)]
    memory_mb: Option<u64>,
    /// Largest message a client may send (query text, Parse, Bind, COPY data), in bytes;
    /// a larger one is refused with 54000 before it is read. Default 64 MiB.
    #[arg(long, global = true)]
    max_message_bytes: Option<u64>,
    /// Most clients connected at once; one more is refused with 53300. Default 100.
    #[arg(long, global = true)]
    max_connections: Option<u64>,
    /// Memory one query's operators may use, in MiB, before they spill or fail with 53200.
    /// Default 512.
    #[arg(long, global = true)]
    query_memory_mb: Option<u64>,
    /// PEM certificate chain: enables TLS on the PostgreSQL port (with --tls-key).
    #[arg(long, global = true)]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, global = true)]
    tls_key: Option<PathBuf>,
    /// File of `user:password` lines: clients authenticate with SCRAM-SHA-256 (users created
    /// with CREATE USER ... PASSWORD are accepted too).
    #[arg(long, global = true)]
    password_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A single-node server with durable state (the default).
    SingleNode,
    /// A single-node server with in-memory state that is gone on exit.
    Playground,
    /// Benchmarks (see benches/README.md).
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// The Nexmark queries of sql/nexmark over nexmark sources (or bids from a CSV file),
    /// each from a clean state with checkpoints every second.
    Nexmark(NexmarkArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct NexmarkArgs {
    /// Events in the generated stream (persons, auctions and bids together).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Comma-separated queries (q0 .. q22, agg = GROUP BY auction with count and max price), or all.
    #[arg(long, default_value = "q0,q1,q2,q5,q7,agg")]
    queries: String,
    /// Read bids from this headerless CSV file (auction,bidder,price,channel,url,date_time,extra).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// One JSON object per query and line.
    #[arg(long)]
    json: bool,
    /// Splits of each generated source.
    #[arg(long, default_value_t = 1)]
    splits: u64,
    /// Declare `WATERMARK FOR date_time AS date_time - INTERVAL 'N' SECOND` on the sources
    /// (windowed aggregates then drop closed windows' state).
    #[arg(long)]
    watermark_secs: Option<u64>,
    /// Where the per-query state directories go (default: the system temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Actors per fragment of the query's view (`SET streaming_parallelism`; 0: one per core).
    #[arg(long, default_value_t = 0)]
    parallelism: u16,
    /// Internal: run this one query in this process.
    #[arg(long, hide = true)]
    single: Option<String>,
}

fn build_config(cli: &Cli) -> Result<ServerConfig, eddy_common::EddyError> {
    let mut config = ServerConfig { http: Some(DEFAULT_HTTP.into()), http_is_default: true, ..ServerConfig::default() };
    if let Some(path) = &cli.config {
        ConfigOverrides::from_file(path)?.apply(&mut config);
    }
    ConfigOverrides::from_env()?.apply(&mut config);
    ConfigOverrides {
        listen: cli.listen.clone(),
        http: cli.http.clone(),
        state_store: cli.state_store.clone(),
        password: cli.password.clone(),
        barrier_interval_ms: cli.barrier_interval_ms,
        block_cache_mb: cli.block_cache_mb,
        cache_dir: cli.cache_dir.clone(),
        cache_disk_mb: cli.cache_disk_mb,
        memory_mb: cli.memory_mb,
        max_message_bytes: cli.max_message_bytes,
        max_connections: cli.max_connections,
        query_memory_mb: cli.query_memory_mb,
        tls_cert: cli.tls_cert.clone(),
        tls_key: cli.tls_key.clone(),
        password_file: cli.password_file.clone(),
    }
    .apply(&mut config);
    if matches!(cli.command, Some(Command::Playground)) {
        config.state_store = "memory://".into();
    }
    Ok(config)
}

/// Where the dashboard and metrics are served unless `--http` says otherwise (RisingWave's
/// dashboard port).
const DEFAULT_HTTP: &str = "127.0.0.1:5691";

/// `eddy bench nexmark`: the parent runs each query in a child process (`--single`).
async fn bench_nexmark(cli: &Cli, args: &NexmarkArgs, config: ServerConfig) -> Result<(), eddy_common::EddyError> {
    let options = eddy_server::bench::NexmarkOptions {
        events: args.events,
        queries: args.queries.split(',').map(|q| q.trim().to_ascii_lowercase()).filter(|q| !q.is_empty()).collect(),
        csv: args.csv.clone(),
        json: args.json,
        barrier_interval: std::time::Duration::from_millis(cli.barrier_interval_ms.unwrap_or(1000).max(1)),
        memory_mb: cli.memory_mb,
        splits: args.splits,
        dir: args.dir.clone(),
        watermark_secs: args.watermark_secs,
        parallelism: args.parallelism,
    };
    if let Some(q) = &args.single {
        return eddy_server::bench::run_one(&options, q, config).await;
    }
    let child_args = |q: &str| {
        let mut a = vec!["bench".to_string(), "nexmark".into(), "--single".into(), q.to_string(), "--events".into(), args.events.to_string()];
        a.extend(["--splits".into(), args.splits.to_string(), "--parallelism".into(), args.parallelism.to_string()]);
        if let Some(w) = args.watermark_secs {
            a.extend(["--watermark-secs".into(), w.to_string()]);
        }
        a.extend(["--barrier-interval-ms".into(), options.barrier_interval.as_millis().to_string()]);
        if let Some(p) = &args.csv {
            a.extend(["--csv".into(), p.display().to_string()]);
        }
        if let Some(d) = &args.dir {
            a.extend(["--dir".into(), d.display().to_string()]);
        }
        if let Some(m) = cli.memory_mb {
            a.extend(["--memory-mb".into(), m.to_string()]);
        }
        a
    };
    eddy_server::bench::run_nexmark(&options, &child_args)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM, only Ctrl-C shuts down cleanly: {e}");
                return ctrl_c().await;
            }
        };
        tokio::select! {
            _ = ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c().await;
}

/// Waits for Ctrl-C. If it cannot be listened for, waits forever rather than shutting down
/// at once (SIGINT then ends the process without a clean shutdown).
async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::error!("cannot listen for Ctrl-C: {e}");
        std::future::pending::<()>().await;
    }
}

/// Limits glibc malloc to two arenas. By default it keeps up to eight per core, each holding
/// on to freed memory; with Eddy's many short-lived allocations across worker threads that
/// costs hundreds of MB (measured: a 5M-row COPY peaks at ~510 MB with the default and ~360 MB
/// with two arenas, at the same speed).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// mimalloc 3 returns a freed page to the system a second after it empties. Under a bulk load
/// that second of freed but still resident pages is 40–60 MiB of the peak RSS (benches/README.md,
/// "A 5M-row COPY in 300 MiB"). Ten milliseconds still let a burst of allocations reuse the
/// pages it freed: point queries run as fast as with a second (`workload point-query`), and a
/// COPY spends about a tenth more CPU; purging at once (`MIMALLOC_PURGE_DELAY=0`) cost point
/// queries a third of their speed when measured at stop 38.
/// An explicit `MIMALLOC_PURGE_DELAY` wins. The option is addressed by its index in mimalloc 3's
/// `mi_option_e`; it is set only if it holds mimalloc 3's default, so another version's
/// numbering changes nothing.
fn shorten_allocator_purge_delay() {
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    const V3_DEFAULT_MS: std::ffi::c_long = 1000;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: reading and setting an allocator option by value; both calls are thread-safe.
    unsafe {
        if libmimalloc_sys::mi_option_get(PURGE_DELAY) == V3_DEFAULT_MS {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 10);
        }
    }
}

/// Turns transparent huge pages off for this process. mimalloc asks for them on its arenas
/// (`madvise(MADV_HUGEPAGE)`), and then touching a few bytes of a 2 MiB range makes all of it
/// resident: a 5M-row COPY peaked at 290–330 MiB with them and at 205–215 MiB without, at the
/// same speed, and point queries were as fast (benches/README.md, "Huge pages"). This is what
/// `MIMALLOC_ALLOW_THP=0` does; setting that variable (to anything) leaves the choice to mimalloc.
fn disable_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: prctl with PR_SET_THP_DISABLE only sets a flag of the calling process.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r != 0 {
        // Only the memory footprint depends on it (e.g. a kernel without the option).
        eprintln!("eddy: cannot turn transparent huge pages off: {}", std::io::Error::last_os_error());
    }
}

/// The process's own work (signals, startup, shutdown) needs one thread; the server runs on
/// its own runtime (see `eddy_server::server`).
fn main() {
    limit_malloc_arenas();
    disable_transparent_huge_pages();
    shorten_allocator_purge_delay();
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(run()),
        Err(e) => {
            eprintln!("eddy: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let cli = Cli::parse();
    let config = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("eddy: {e}");
            std::process::exit(2);
        }
    };
    if let Some(Command::Bench { what: BenchCommand::Nexmark(args) }) = &cli.command {
        // The benchmark's servers serve no dashboard (they would contend for its port).
        let config = ServerConfig { http: None, ..config };
        std::process::exit(match bench_nexmark(&cli, args, config).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("eddy bench: {e}");
                1
            }
        });
    }
    // One server per local state directory: a second one refuses here (on S3, SlateDB fences
    // the older server instead, which then stops below).
    let _lock = match eddy_storage::object_store_url::lock_local_store(&config.state_store) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("eddy: cannot start: {}", e.message);
            std::process::exit(1);
        }
    };
    let handle = match eddy_server::start(config.clone()).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("eddy: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let addr = handle.addr;
    println!(
        "Eddy {} listening on {addr} (state: {})\nConnect with: psql -h {} -p {} -d dev -U root",
        env!("CARGO_PKG_VERSION"),
        handle.engine.store.description(),
        addr.ip(),
        addr.port()
    );
    if let Some(http) = handle.http_addr {
        println!("Dashboard: http://{http}/ (metrics: http://{http}/metrics)");
    }
    let store = handle.engine.store.clone();
    tokio::select! {
        _ = shutdown_signal() => {}
        _ = store.fenced() => {
            // Everything acknowledged is durable; the newer server owns the store now.
            eprintln!("eddy: stopping: another eddy process opened state store {} and fenced this one", store.description());
            std::process::exit(1);
        }
    }
    println!("eddy: shutting down");
    if let Err(e) = handle.shutdown().await {
        eprintln!("eddy: shutdown: {e}");
        std::process::exit(1);
    }
}
