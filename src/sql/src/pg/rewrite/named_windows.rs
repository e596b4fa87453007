//! Named windows (`WINDOW w AS (PARTITION BY g)`) written into the calls that use them, as
//! PostgreSQL reads them: `OVER w` is the window itself, `OVER (w ORDER BY k)` copies its
//! PARTITION BY (and its ORDER BY and frame where the call has none). DataFusion dropped the
//! copied PARTITION BY of the second form (a running sum ran over the whole table) and did not
//! resolve a named window in the query's ORDER BY (`ORDER BY rank() OVER w`).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Ident, NamedWindowExpr, Query, SetExpr, VisitMut, WindowSpec, WindowType};

use super::ast::own_expressions;

/// `spec` with what it leaves out taken from the named window it starts from, if known.
fn resolved(spec: &WindowSpec, windows: &HashMap<String, WindowSpec>) -> WindowSpec {
    let Some(base) = spec.window_name.as_ref().and_then(|n| windows.get(&n.value)) else { return spec.clone() };
    WindowSpec {
        window_name: None,
        partition_by: if spec.partition_by.is_empty() { base.partition_by.clone() } else { spec.partition_by.clone() },
        order_by: if spec.order_by.is_empty() { base.order_by.clone() } else { spec.order_by.clone() },
        window_frame: spec.window_frame.clone().or_else(|| base.window_frame.clone()),
    }
}

/// Inlines the named windows of `q`'s own SELECT into its window calls (see the module docs).
pub(super) fn inline_named_windows(q: &mut Query) {
    let SetExpr::Select(select) = q.body.as_mut() else { return };
    if select.named_window.is_empty() {
        return;
    }
    // Each definition may start from an earlier one (`WINDOW w1 AS (...), w2 AS (w1 ORDER BY k)`).
    let mut windows: HashMap<String, WindowSpec> = HashMap::new();
    for def in &select.named_window {
        let spec = match &def.1 {
            NamedWindowExpr::WindowSpec(spec) => resolved(spec, &windows),
            NamedWindowExpr::NamedWindow(other) => match windows.get(&other.value) {
                Some(spec) => spec.clone(),
                None => continue,
            },
        };
        windows.insert(def.0.value.clone(), spec);
    }
    let mut inline = own_expressions(|e: &mut Expr| {
        if let Expr::Function(f) = e {
            let spec = match &f.over {
                Some(WindowType::NamedWindow(Ident { value, .. })) => windows.get(value).cloned(),
                Some(WindowType::WindowSpec(spec)) if spec.window_name.is_some() => Some(resolved(spec, &windows)),
                _ => None,
            };
            if let Some(spec) = spec {
                f.over = Some(WindowType::WindowSpec(spec));
            }
        }
        ControlFlow::Continue(())
    });
    let _ = select.visit(&mut inline);
    let _ = q.order_by.visit(&mut inline);
}
