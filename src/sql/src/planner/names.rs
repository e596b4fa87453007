//! Output column names as planned: PostgreSQL allows repeated names, DataFusion does not, so a
//! repeat is planned with a marker that clients never see.

/// Marks a duplicate output name: DataFusion needs unique names, PostgreSQL allows repeats
/// (`SELECT a, a`, `SELECT 1, 1` both name two columns alike). The `n`th repeat of `name` is
/// planned as `name` + [`DUPLICATE_MARK`] + `n`; [`output_name`] gives the name back.
pub const DUPLICATE_MARK: char = '\u{1}';

/// The name a client sees for a planned output column (see [`DUPLICATE_MARK`]).
pub fn output_name(planned: &str) -> &str {
    planned.split(DUPLICATE_MARK).next().unwrap_or(planned)
}
