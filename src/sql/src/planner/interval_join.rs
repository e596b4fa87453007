//! Interval joins: the bounds an inner join's condition puts on the event times of its
//! matches (`a.ts BETWEEN b.ts - INTERVAL '1' HOUR AND b.ts`), which let the join drop rows
//! the watermarks have passed (see `eddy_stream`'s `hash_join::interval`).

use arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, Operator as BinOp};
use eddy_stream::operator::{IntervalBound, Side};

use crate::planner::temporal::constant_us;

/// What the planner knows of one side of a join.
pub struct JoinInput<'a> {
    /// Columns of the side's rows that carry a watermark.
    pub watermarks: &'a [usize],
    /// The side only inserts.
    pub append_only: bool,
}

/// The bounds the conjuncts of `filter` (over `joined`: the left side's `left_columns`
/// columns, then the right side's) put on watermarked timestamp columns of the two sides;
/// `out_col` places a side's column in the join's output.
pub fn interval_bounds(
    filter: &Expr,
    joined: &DFSchema,
    left_columns: usize,
    inputs: [JoinInput<'_>; 2],
    out_col: impl Fn(Side, usize) -> usize,
) -> Vec<IntervalBound> {
    // `joined` column `i` as (side, column of that side's rows), if it has a watermark.
    let place = |i: usize| -> Option<(Side, usize)> {
        let (side, col) = if i < left_columns { (Side::Left, i) } else { (Side::Right, i - left_columns) };
        let input = &inputs[usize::from(side == Side::Right)];
        (input.watermarks.contains(&col) && matches!(joined.field(i).data_type(), DataType::Timestamp(..))).then_some((side, col))
    };
    // `a + x <= b + y` bounds `a` by `b`: a <= b + (y - x).
    let at_most = |a: &Expr, b: &Expr| -> Option<IntervalBound> {
        let ((ai, x), (bi, y)) = (shifted(a, joined)?, shifted(b, joined)?);
        let ((aside, acol), (bside, bcol)) = (place(ai)?, place(bi)?);
        (aside != bside).then_some(())?;
        Some(IntervalBound {
            side: bside,
            col: bcol,
            other_col: acol,
            offset_us: y.checked_sub(x)?,
            out_col: out_col(bside, bcol),
            retracts: !inputs[usize::from(bside == Side::Right)].append_only,
        })
    };
    let mut out = Vec::new();
    for c in split_conjunction(filter) {
        match c {
            Expr::BinaryExpr(b) => match b.op {
                BinOp::Lt | BinOp::LtEq => out.extend(at_most(&b.left, &b.right)),
                BinOp::Gt | BinOp::GtEq => out.extend(at_most(&b.right, &b.left)),
                _ => {}
            },
            Expr::Between(b) if !b.negated => {
                out.extend(at_most(&b.low, &b.expr));
                out.extend(at_most(&b.expr, &b.high));
            }
            _ => {}
        }
    }
    out
}

/// `column + k` (through `±` constant intervals of days or less): the column's index in
/// `schema` and `k` in microseconds.
fn shifted(e: &Expr, schema: &DFSchema) -> Option<(usize, i64)> {
    let constant = constant_us;
    match e {
        Expr::Column(c) => Some((schema.index_of_column(c).ok()?, 0)),
        Expr::Alias(a) => shifted(&a.expr, schema),
        Expr::BinaryExpr(b) => match b.op {
            BinOp::Plus => match (shifted(&b.left, schema), constant(&b.right)) {
                (Some((i, k)), Some(c)) => Some((i, k.checked_add(c)?)),
                _ => {
                    let (i, k) = shifted(&b.right, schema)?;
                    Some((i, k.checked_add(constant(&b.left)?)?))
                }
            },
            BinOp::Minus => {
                let (i, k) = shifted(&b.left, schema)?;
                Some((i, k.checked_sub(constant(&b.right)?)?))
            }
            _ => None,
        },
        _ => None,
    }
}
