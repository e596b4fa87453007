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

/// Rewrites each expression of a grouping set with `f`, a changed one aliased to its old name
/// (the aggregation's column names must not change). An alias around the whole set would make
/// the aggregation read it as one plain group expression, so a pass that keeps names with
/// `NamePreserver` calls this for grouping sets instead.
pub fn map_grouping_set(
    set: datafusion::logical_expr::expr::GroupingSet,
    mut f: impl FnMut(datafusion::logical_expr::Expr) -> datafusion::error::Result<datafusion::common::tree_node::Transformed<datafusion::logical_expr::Expr>>,
) -> datafusion::error::Result<datafusion::common::tree_node::Transformed<datafusion::logical_expr::Expr>> {
    use datafusion::common::tree_node::Transformed;
    use datafusion::logical_expr::expr::GroupingSet;
    let mut changed = false;
    let mut map = |exprs: Vec<datafusion::logical_expr::Expr>| -> datafusion::error::Result<Vec<datafusion::logical_expr::Expr>> {
        exprs
            .into_iter()
            .map(|e| {
                let name = e.schema_name().to_string();
                let t = f(e)?;
                changed |= t.transformed;
                Ok(if t.transformed { t.data.alias(name) } else { t.data })
            })
            .collect()
    };
    let set = match set {
        GroupingSet::Rollup(exprs) => GroupingSet::Rollup(map(exprs)?),
        GroupingSet::Cube(exprs) => GroupingSet::Cube(map(exprs)?),
        GroupingSet::GroupingSets(sets) => GroupingSet::GroupingSets(sets.into_iter().map(&mut map).collect::<datafusion::error::Result<_>>()?),
    };
    let e = datafusion::logical_expr::Expr::GroupingSet(set);
    Ok(if changed { Transformed::yes(e) } else { Transformed::no(e) })
}
