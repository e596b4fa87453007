//! Cursors, as PostgreSQL has them (forward-only) plus Materialize's cursors over `SUBSCRIBE`:
//! - `DECLARE name [ASENSITIVE | INSENSITIVE] [NO SCROLL] CURSOR [WITH | WITHOUT HOLD] FOR
//!   query | SUBSCRIBE ...`: only inside a transaction block unless `WITH HOLD`; a cursor
//!   without HOLD closes when its block ends;
//! - `FETCH [NEXT | FORWARD [count | ALL] | count | ALL] [FROM | IN] name [WITH (timeout =
//!   '1s')]`: up to `count` rows (1 when omitted). A query's cursor returns the next rows of its
//!   result, a `SUBSCRIBE` cursor what has arrived: it waits for the first row (at most the
//!   timeout, if one is given), then returns the rows already there;
//! - `CLOSE name | ALL`.
//!
//! A query's rows come from its plan as FETCH asks for them (the snapshot it reads is fixed at
//! DECLARE), so a cursor holds at most one batch beyond what was fetched.

use std::time::Duration;

use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::tokenizer::Token;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};
use futures::{FutureExt, StreamExt};

use crate::frontend::output::{command, Output};
use crate::frontend::session::Session;
use crate::frontend::split::Code;
use crate::frontend::state::Cursor;
use crate::frontend::subscribe::{parse_subscribe, SubscribeSpec};

/// What a cursor reads.
#[derive(Debug, Clone)]
pub enum CursorQuery {
    /// A query (its statement and text).
    Sql(Box<Statement>, String),
    /// A `SUBSCRIBE`.
    Subscribe(SubscribeSpec),
}

/// A parsed `DECLARE ... CURSOR`.
#[derive(Debug, Clone)]
pub struct DeclareSpec {
    /// The cursor's name.
    pub name: String,
    /// `WITH HOLD`: the cursor outlives its transaction block.
    pub hold: bool,
    /// What it reads.
    pub query: CursorQuery,
}

/// A parsed `FETCH`.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchSpec {
    /// The cursor's name.
    pub name: String,
    /// Most rows to return (`None`: all).
    pub count: Option<usize>,
    /// For a `SUBSCRIBE` cursor: how long to wait for a first row.
    pub timeout: Option<Duration>,
}

/// Parses `DECLARE ...` (see the module comment).
pub fn parse_declare(sql: &str, parse_query: impl FnOnce(&str) -> Result<Vec<Statement>>) -> Result<DeclareSpec> {
    let mut code = Code::new(sql)?;
    code.expect_word("DECLARE")?;
    let name = code.name()?;
    loop {
        match code.peek_word().as_deref() {
            Some("CURSOR") => break,
            Some("ASENSITIVE" | "INSENSITIVE") => {}
            Some("NO") => {
                code.next_token();
                code.expect_word("SCROLL")?;
                continue;
            }
            Some("SCROLL") => return Err(not_supported!("scrollable cursors are not supported: cursors only move forward")),
            Some("BINARY") => return Err(not_supported!("binary cursors are not supported (ask for binary results in the extended protocol instead)")),
            _ => return Err(code.unexpected("CURSOR")),
        }
        code.next_token();
    }
    code.expect_word("CURSOR")?;
    let mut hold = false;
    if code.eat_word("WITH") {
        code.expect_word("HOLD")?;
        hold = true;
    } else if code.eat_word("WITHOUT") {
        code.expect_word("HOLD")?;
    }
    code.expect_word("FOR")?;
    let rest = code.rest();
    let query = if code.peek_word().as_deref() == Some("SUBSCRIBE") {
        CursorQuery::Subscribe(parse_subscribe(rest)?)
    } else {
        let mut stmts = parse_query(rest)?;
        match (stmts.pop(), stmts.is_empty()) {
            (Some(s @ Statement::Query(_)), true) => CursorQuery::Sql(Box::new(s), rest.to_string()),
            _ => return Err(user_err!(sqlstate::SYNTAX_ERROR, "DECLARE CURSOR takes one SELECT (or VALUES, or SUBSCRIBE)")),
        }
    };
    Ok(DeclareSpec { name, hold, query })
}

/// Parses `FETCH ...` (see the module comment).
pub fn parse_fetch(sql: &str) -> Result<FetchSpec> {
    let mut code = Code::new(sql)?;
    code.expect_word("FETCH")?;
    let count_of = |t: Option<Token>| -> Result<Option<usize>> {
        match t {
            Some(Token::Number(n, _)) => {
                n.parse().map(Some).map_err(|_| user_err!(sqlstate::SYNTAX_ERROR, "FETCH takes a row count, not \"{n}\""))
            }
            _ => Err(user_err!(sqlstate::SYNTAX_ERROR, "FETCH takes a row count")),
        }
    };
    let mut count = Some(1);
    match code.peek_word().as_deref() {
        Some("NEXT") => {
            code.next_token();
        }
        Some("ALL") => {
            code.next_token();
            count = None;
        }
        Some("FORWARD") => {
            code.next_token();
            if code.eat_word("ALL") {
                count = None;
            } else if matches!(code.peek(), Some(Token::Number(..))) {
                count = count_of(code.next_token())?;
            }
        }
        Some("PRIOR" | "FIRST" | "LAST" | "ABSOLUTE" | "RELATIVE" | "BACKWARD") => {
            return Err(user_err!(sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE, "cursor can only scan forward"));
        }
        _ if matches!(code.peek(), Some(Token::Number(..))) => count = count_of(code.next_token())?,
        _ => {}
    }
    if !code.eat_word("FROM") {
        code.eat_word("IN");
    }
    let name = code.name()?;
    let mut timeout = None;
    if code.eat_word("WITH") {
        for (option, value) in code.options()? {
            match (option.as_str(), value) {
                ("timeout", Some(v)) => timeout = Some(parse_duration(&v)?),
                (other, _) => return Err(user_err!(sqlstate::SYNTAX_ERROR, "unknown FETCH option \"{other}\" (known: timeout = '<duration>')")),
            }
        }
    }
    code.expect_end()?;
    Ok(FetchSpec { name, count, timeout })
}

/// Parses `CLOSE name | ALL`: `None` for ALL.
pub fn parse_close(sql: &str) -> Result<Option<String>> {
    let mut code = Code::new(sql)?;
    code.expect_word("CLOSE")?;
    let target = if code.eat_word("ALL") { None } else { Some(code.name()?) };
    code.expect_end()?;
    Ok(target)
}

/// `'1s'`, `'250ms'`, `'2min'`, `'0'`, `1.5` (seconds).
fn parse_duration(v: &str) -> Result<Duration> {
    eddy_common::interval::parse_duration(v, true)
        .ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid timeout \"{v}\" (say e.g. '1s' or '250ms')"))
}

impl Session {
    /// `DECLARE ... CURSOR`.
    pub(crate) async fn declare(&mut self, spec: &DeclareSpec, params: Vec<datafusion::scalar::ScalarValue>) -> Result<Output> {
        if !spec.hold && self.block.is_none() {
            return Err(user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "DECLARE CURSOR can only be used in transaction blocks"));
        }
        if self.cursors.contains_key(&spec.name) {
            return Err(user_err!(sqlstate::DUPLICATE_CURSOR, "cursor \"{}\" already exists", spec.name));
        }
        let (schema, stream, follows) = match &spec.query {
            CursorQuery::Subscribe(s) => {
                let (schema, stream) = self.subscribe(s).await?;
                (schema, stream, true)
            }
            CursorQuery::Sql(stmt, text) => {
                let (schema, stream) = self.query_rows(stmt.as_ref().clone(), text.clone(), params).await?;
                (schema, stream, false)
            }
        };
        self.cursors.insert(spec.name.clone(), Cursor { schema, stream: parking_lot::Mutex::new(stream), pending: None, follows, hold: spec.hold, in_block: self.block.is_some(), ended: false });
        Ok(command("DECLARE CURSOR"))
    }

    /// The columns `FETCH` returns from cursor `name`.
    pub fn cursor_schema(&self, name: &str) -> Result<arrow::datatypes::SchemaRef> {
        self.cursors.get(name).map(|c| c.schema.clone()).ok_or_else(|| no_cursor(name))
    }

    /// `FETCH`.
    pub(crate) async fn fetch(&mut self, spec: &FetchSpec) -> Result<Output> {
        let cursor = self.cursors.get_mut(&spec.name).ok_or_else(|| no_cursor(&spec.name))?;
        let want = spec.count.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut n = 0usize;
        while n < want {
            let batch = match cursor.pending.take() {
                Some(b) => b,
                None if cursor.ended => break,
                None => {
                    let next = if !cursor.follows {
                        cursor.stream.get_mut().next().await
                    } else if n > 0 {
                        // What has arrived, without waiting for more.
                        match cursor.stream.get_mut().next().now_or_never() {
                            Some(next) => next,
                            None => break,
                        }
                    } else if let Some(t) = spec.timeout {
                        match tokio::time::timeout(t, cursor.stream.get_mut().next()).await {
                            Ok(next) => next,
                            Err(_) => break,
                        }
                    } else {
                        cursor.stream.get_mut().next().await
                    };
                    match next {
                        None => {
                            cursor.ended = true;
                            break;
                        }
                        Some(Err(e)) => {
                            cursor.ended = true;
                            return Err(e.into());
                        }
                        Some(Ok(b)) => b,
                    }
                }
            };
            let take = (want - n).min(batch.num_rows());
            if take < batch.num_rows() {
                cursor.pending = Some(batch.slice(take, batch.num_rows() - take));
            }
            n += take;
            out.push(batch.slice(0, take));
        }
        let schema = cursor.schema.clone();
        let stream = datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(out.into_iter().map(Ok)));
        Ok(Output::Returned { tag: "FETCH".into(), schema, stream: Box::pin(stream) })
    }

    /// `CLOSE name | ALL`.
    pub(crate) fn close_cursor(&mut self, name: Option<&str>) -> Result<Output> {
        match name {
            None => {
                self.cursors.clear();
                Ok(command("CLOSE CURSOR ALL"))
            }
            Some(n) => {
                self.cursors.remove(n).ok_or_else(|| no_cursor(n))?;
                Ok(command("CLOSE CURSOR"))
            }
        }
    }

    /// Closes the cursors of a transaction block that ended: those without HOLD, and, unless
    /// it `committed`, also the HOLD cursors it declared (as PostgreSQL does).
    pub(crate) fn close_block_cursors(&mut self, committed: bool) {
        self.cursors.retain(|_, c| c.hold && (committed || !c.in_block));
        for c in self.cursors.values_mut() {
            c.in_block = false;
        }
    }
}

fn no_cursor(name: &str) -> eddy_common::EddyError {
    user_err!(sqlstate::INVALID_CURSOR_NAME, "cursor \"{name}\" does not exist")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> Result<Vec<Statement>> {
        crate::planner::parse::parse_bounded(sql)
    }

    #[test]
    fn cursor_statements_parse() {
        let d = parse_declare("DECLARE \"My Cur\" NO SCROLL CURSOR WITH HOLD FOR SELECT 1", query).unwrap();
        assert_eq!((d.name.as_str(), d.hold), ("My Cur", true));
        assert!(matches!(d.query, CursorQuery::Sql(..)));
        let d = parse_declare("declare c cursor for subscribe to v with (progress)", query).unwrap();
        assert!(matches!(d.query, CursorQuery::Subscribe(SubscribeSpec { progress: true, .. })));
        assert_eq!(parse_declare("DECLARE c SCROLL CURSOR FOR SELECT 1", query).unwrap_err().sqlstate, sqlstate::FEATURE_NOT_SUPPORTED);
        assert_eq!(parse_declare("DECLARE c CURSOR FOR INSERT INTO t VALUES (1)", query).unwrap_err().sqlstate, sqlstate::SYNTAX_ERROR);

        let f = |s: &str| parse_fetch(s).map(|f| (f.name, f.count, f.timeout));
        assert_eq!(f("FETCH c").unwrap(), ("c".into(), Some(1), None));
        assert_eq!(f("FETCH NEXT FROM c").unwrap(), ("c".into(), Some(1), None));
        assert_eq!(f("FETCH 5 IN C").unwrap(), ("c".into(), Some(5), None));
        assert_eq!(f("FETCH FORWARD 7 FROM \"C\"").unwrap(), ("C".into(), Some(7), None));
        assert_eq!(f("fetch forward all from c").unwrap(), ("c".into(), None, None));
        assert_eq!(f("FETCH ALL c WITH (timeout = '250ms')").unwrap(), ("c".into(), None, Some(Duration::from_millis(250))));
        assert_eq!(f("FETCH ALL c WITH (TIMEOUT = '0s')").unwrap(), ("c".into(), None, Some(Duration::ZERO)));
        assert_eq!(parse_fetch("FETCH PRIOR FROM c").unwrap_err().sqlstate, sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE);
        assert_eq!(parse_fetch("FETCH ALL c WITH (timeout = 'soon')").unwrap_err().sqlstate, sqlstate::INVALID_PARAMETER_VALUE);
        assert_eq!(parse_close("CLOSE ALL").unwrap(), None);
        assert_eq!(parse_close("CLOSE c").unwrap(), Some("c".into()));
    }
}
