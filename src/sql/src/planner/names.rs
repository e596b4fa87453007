//! Output column names as planned: PostgreSQL allows repeated names, DataFusion does not, so a
//! repeat is planned with a marker that clients never see; and the names a plan pass keeps
//! when it rewrites a node's expressions ([`map_expressions_keeping_names`]).

use datafusion::common::tree_node::Transformed;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::GroupingSet;
use datafusion::logical_expr::Expr;

/// Marks a duplicate output name: DataFusion needs unique names, PostgreSQL allows repeats
/// (`SELECT a, a`, `SELECT 1, 1` both name two columns alike). The `n`th repeat of `name` is
/// planned as `name` + [`DUPLICATE_MARK`] + `n`; [`output_name`] gives the name back.
pub const DUPLICATE_MARK: char = '\u{1}';

/// The name a client sees for a planned output column (see [`DUPLICATE_MARK`]).
pub fn output_name(planned: &str) -> &str {
    planned.split(DUPLICATE_MARK).next().unwrap_or(planned)
}

/// `node`'s expressions rewritten by `f`, a changed one aliased to its old name (the plan above
/// reads the columns by name), as `NamePreserver` does. A grouping set has each of its
/// expressions rewritten and aliased instead: an alias around the whole set would make the
/// aggregation read it as one plain group expression (`GROUP BY ROLLUP (q % 3)` failed with
/// "No field named ..." when a pass changed its literal).
pub fn map_expressions_keeping_names(
    node: datafusion::logical_expr::LogicalPlan,
    mut f: impl FnMut(Expr) -> DfResult<Transformed<Expr>>,
) -> DfResult<Transformed<datafusion::logical_expr::LogicalPlan>> {
    let names = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&node);
    node.map_expressions(|e| match e {
        Expr::GroupingSet(set) => map_grouping_set(set, &mut f),
        e => {
            let saved = names.save(&e);
            let t = f(e)?;
            Ok(if t.transformed { Transformed::yes(saved.restore(t.data)) } else { t })
        }
    })
}

/// Each expression of a grouping set rewritten by `f`, a changed one aliased to its old name.
fn map_grouping_set(set: GroupingSet, f: &mut impl FnMut(Expr) -> DfResult<Transformed<Expr>>) -> DfResult<Transformed<Expr>> {
    let mut changed = false;
    let mut map = |exprs: Vec<Expr>| -> DfResult<Vec<Expr>> {
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
        GroupingSet::GroupingSets(sets) => GroupingSet::GroupingSets(sets.into_iter().map(&mut map).collect::<DfResult<_>>()?),
    };
    let e = Expr::GroupingSet(set);
    Ok(if changed { Transformed::yes(e) } else { Transformed::no(e) })
}
