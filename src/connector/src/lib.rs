//! Sources and sinks (Kafka, Iceberg, Postgres, SUBSCRIBE) with their WITH-option parsing: not
//! built yet. Sources will inject barriers like the table writers of `eddy-stream` and record
//! their positions with each epoch's commit; sinks will act on committed epochs only (see
//! `docs/architecture.md`).
