//! SlateDB's settings, scaled by the memory budget.

use slatedb::config::Settings;

/// SlateDB's settings for a store whose writes may hold `buffer_bytes` before L0.
///
/// Memory: SlateDB's defaults let 512 MiB of writes wait in memtables, cut 64 MiB L0 SSTs,
/// build four of them at once and compact into outputs of up to 1 GiB, each held in memory
/// until uploaded. Eddy's epochs are made durable by the commit's own flush, so far smaller
/// buffers keep the server's memory flat under bulk loads; all of them scale with the one
/// figure the memory budget gives (see benches/README.md, "SlateDB's buffers").
/// `object_store_max_retries` is `StoreTuning`'s.
pub(crate) fn lsm_settings(object_store_max_retries: Option<u32>, buffer_bytes: usize) -> Settings {
    let buffer_bytes = buffer_bytes.max(4 << 20);
    Settings {
        object_store_max_retries,
        max_unflushed_bytes: buffer_bytes,
        // Not smaller: more, smaller L0 SSTs reach `l0_max_ssts` sooner, and then writers wait
        // for compaction (a quarter halved the COPY's speed; benches/README.md).
        l0_sst_size_bytes: buffer_bytes / 2,
        // Twice SlateDB's 8: with 8 MiB L0 SSTs (the default budget), eight of them stalled a
        // bulk load on compaction (a 5M-row COPY took 44 s instead of 39 s).
        l0_max_ssts: 16,
        l0_max_ssts_per_key: 16,
        // Two L0 SSTs built and uploaded at once (each held whole in memory until its upload
        // completes); SlateDB's four are meant for slow object stores under large buffers.
        l0_flush_parallelism: 2,
        // One compaction at a time, in one piece: each holds SST builders and read-ahead
        // blocks in memory, and a small machine has few cores to give them. SlateDB's
        // embedded worker would otherwise run four jobs, each split four ways, each input
        // SST read 8 MiB ahead, into outputs of up to 1 GiB.
        //
        // SlateDB's compaction polls stay at 5 s. Under a bulk load L0 then reaches
        // `l0_max_ssts` before a job is picked up and writers wait for seconds, but polling at
        // 250 ms or 1 s merged sorted runs again and again during the load: a 5M-row COPY ran
        // in 22 s instead of 33 and spent 35-38 CPU-seconds instead of 26-29, at a higher
        // peak RSS (benches/README.md).
        compactor_options: Some(slatedb::config::CompactorOptions {
            max_concurrent_compactions: 1,
            worker: Some(slatedb::config::CompactionWorkerOptions {
                max_concurrent_compactions: 1,
                max_subcompactions: 1,
                // Each output SST is built whole in memory before its upload.
                max_sst_size: (buffer_bytes / 2).clamp(8 << 20, 32 << 20),
                max_fetch_tasks: 2,
                // Read ahead per input SST and fetch task: a compaction of 16 L0 SSTs at 1 MiB
                // held 17 MB of reads at a 5M-row COPY's peak.
                bytes_to_fetch: 256 << 10,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Settings::default()
    }
}
