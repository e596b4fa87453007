//! Splits a query string into statements at top-level semicolons with sqlparser's tokenizer
//! (so quotes, `E'...'` escapes, dollar quotes, comments and placeholders are read exactly as
//! the parser reads them), keeping each statement's own source text and its leading words.
//!
//! The same pass bounds how deeply each statement's syntax tree can nest ([`Piece::depth`]), so a
//! statement too deep to parse, plan and evaluate on the server's stacks is refused before any
//! tree is built (a left-deep chain like `1+1+...+1` does not recurse in the parser, but every
//! later pass over its tree does, down to dropping it).

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// One statement of a query string.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Its source text (without the terminating semicolon).
    pub text: String,
    /// Its first words, upper-cased (unquoted identifiers and keywords only), for recognising
    /// Eddy's own statements (`FLUSH`, `VERIFY MATERIALIZED VIEW v`, ...).
    pub words: Vec<String>,
    /// Byte offset in `text` after each of `words`.
    pub word_ends: Vec<usize>,
    /// An upper bound on the nesting depth of the statement's syntax tree (see [`Depth`]).
    pub depth: usize,
}

impl Piece {
    /// The text after the first `n` words, trimmed.
    pub fn rest_after(&self, n: usize) -> &str {
        let at = if n == 0 { 0 } else { self.word_ends.get(n - 1).copied().unwrap_or(self.text.len()) };
        self.text[at..].trim()
    }

    /// True if the statement starts with the words `w` (case-insensitive).
    pub fn starts_with(&self, w: &[&str]) -> bool {
        self.words.len() >= w.len() && self.words.iter().zip(w).all(|(a, b)| a.eq_ignore_ascii_case(b))
    }
}

/// Maximum words remembered per statement (Eddy's own statements have at most four).
const LEADING_WORDS: usize = 6;

/// The tokens of `sql` (whitespace and comments included) with the byte offset each starts
/// at, or `None` if the tokenizer rejects the text.
pub fn tokens_with_offsets(sql: &str) -> Option<Vec<(Token, usize)>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).with_unescape(false).tokenize_with_location().ok()?;
    // Locations are (line, column in chars); tokens come in order, so offsets advance.
    let (mut line, mut col, mut pos) = (1u64, 1u64, 0usize);
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        let (target_line, target_col) = (t.span.start.line, t.span.start.column);
        let mut found = sql.len();
        for (i, ch) in sql[pos..].char_indices() {
            if line == target_line && col == target_col {
                found = pos + i;
                break;
            }
            if ch == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        pos = found;
        out.push((t.token, found));
    }
    Some(out)
}

/// The non-empty statements of `sql` (comment-only pieces dropped). Input the tokenizer
/// rejects (an unterminated quote, ...) is one statement, so the parser reports the error.
pub fn split_statements(sql: &str) -> Vec<Piece> {
    let Some(tokens) = tokens_with_offsets(sql) else {
        let text = sql.trim();
        return if text.is_empty() { vec![] } else { vec![Piece { text: text.to_string(), words: vec![], word_ends: vec![], depth: 0 }] };
    };
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut words: Vec<(String, usize)> = Vec::new();
    let mut has_code = false;
    let mut words_open = true;
    let finish = |start: usize, end: usize, words: &mut Vec<(String, usize)>, depth: &mut Depth, out: &mut Vec<Piece>| {
        let raw = &sql[start..end];
        let lead = raw.len() - raw.trim_start().len();
        let text = raw.trim();
        let (w, ends): (Vec<String>, Vec<usize>) =
            words.drain(..).map(|(w, e)| (w, e.saturating_sub(start + lead).min(text.len()))).unzip();
        out.push(Piece { text: text.to_string(), words: w, word_ends: ends, depth: std::mem::take(depth).finish() });
    };
    let mut depth = Depth::default();
    for (token, at) in &tokens {
        if !matches!(token, Token::SemiColon) {
            depth.token(token);
        }
        match token {
            Token::Whitespace(_) => {}
            Token::SemiColon => {
                if has_code {
                    finish(start, *at, &mut words, &mut depth, &mut out);
                }
                depth = Depth::default();
                words.clear();
                start = at + 1;
                has_code = false;
                words_open = true;
            }
            Token::Word(w) if words_open && w.quote_style.is_none() && words.len() < LEADING_WORDS => {
                has_code = true;
                words.push((w.value.to_ascii_uppercase(), at + w.value.len()));
            }
            _ => {
                has_code = true;
                words_open = false;
            }
        }
    }
    if has_code {
        finish(start, sql.len(), &mut words, &mut depth, &mut out);
    }
    out
}

/// Takes RisingWave's table-level `ON CONFLICT { OVERWRITE | IGNORE | DO NOTHING | DO UPDATE
/// FULL | DO UPDATE IF NOT NULL }` out of a `CREATE TABLE` statement (sqlparser does not know
/// it): the statement without the clause, and the clause's words (upper-cased).
pub fn take_table_conflict_clause(sql: &str) -> Option<(String, Vec<String>)> {
    let tokens = tokens_with_offsets(sql)?;
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let word = |i: usize| match code.get(i).map(|(t, _)| t) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let mut depth = 0i32;
    for i in 0..code.len() {
        match &code[i].0 {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth != 0 || word(i).as_deref() != Some("ON") || word(i + 1).as_deref() != Some("CONFLICT") {
            continue;
        }
        let rest: Vec<String> = (i + 2..code.len()).map_while(word).collect();
        let n = ["OVERWRITE", "IGNORE"]
            .iter()
            .any(|w| rest.first().map(String::as_str) == Some(*w))
            .then_some(1)
            .or_else(|| rest.starts_with(&["DO".into(), "NOTHING".into()]).then_some(2))
            .or_else(|| rest.starts_with(&["DO".into(), "UPDATE".into(), "IF".into(), "NOT".into(), "NULL".into()]).then_some(5))
            .or_else(|| rest.starts_with(&["DO".into(), "UPDATE".into(), "FULL".into()]).then_some(3))?;
        let start = code[i].1;
        let end = code.get(i + 2 + n).map(|(_, at)| *at).unwrap_or(sql.len());
        let text = format!("{}{}", &sql[..start], &sql[end..]);
        return Some((text, rest[..n].to_vec()));
    }
    None
}

/// An upper bound on a statement's syntax-tree depth, computed from its tokens in one pass
/// without recursion. Every level of the tree consumes at least one token that is not a plain
/// value (a literal or an identifier) or a separator, except that lists do not nest: items
/// separated by commas are siblings. So the bound of a parenthesised group is the largest,
/// over its items (separated by commas, or by set operations: `UNION`, ...), of the item's
/// operator and keyword tokens plus its deepest inner group, plus the group's set operations.
/// It over-estimates (a keyword is not always a level), never under-estimates.
#[derive(Debug, Default)]
pub struct Depth {
    /// Open groups, outermost first (the statement itself is the implicit outermost group).
    open: Vec<Group>,
    /// The statement-level group.
    top: Group,
}

/// One parenthesised (or bracketed) group being scanned.
#[derive(Debug, Default, Clone, Copy)]
struct Group {
    /// `UNION` / `INTERSECT` / `EXCEPT` in this group.
    set_ops: usize,
    /// Operator and keyword tokens in the current item.
    item_ops: usize,
    /// Deepest inner group of the current item.
    item_inner: usize,
    /// Deepest item so far.
    deepest_item: usize,
}

impl Group {
    fn end_item(&mut self) {
        self.deepest_item = self.deepest_item.max(self.item_ops + self.item_inner);
        self.item_ops = 0;
        self.item_inner = 0;
    }

    fn depth(mut self) -> usize {
        self.end_item();
        self.set_ops + self.deepest_item
    }
}

impl Depth {
    fn current(&mut self) -> &mut Group {
        self.open.last_mut().unwrap_or(&mut self.top)
    }

    /// Accounts for the next token of the statement.
    pub fn token(&mut self, t: &Token) {
        match t {
            Token::LParen | Token::LBracket => self.open.push(Group::default()),
            Token::RParen | Token::RBracket => self.close(),
            Token::Comma => self.current().end_item(),
            // The branches of a set operation are siblings under a left-deep chain of
            // operations: the chain counts once per operation, the branches by the deepest.
            Token::Word(w) if matches!(w.keyword, Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT) => {
                let g = self.current();
                g.set_ops += 1;
                g.end_item();
            }
            Token::Word(w) if w.keyword == Keyword::NoKeyword || w.quote_style.is_some() => {}
            Token::Whitespace(_)
            | Token::Number(..)
            | Token::Period
            | Token::Placeholder(_)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::EscapedStringLiteral(_)
            | Token::NationalStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::EOF => {}
            _ => self.current().item_ops += 1,
        }
    }

    fn close(&mut self) {
        if let Some(g) = self.open.pop() {
            let d = g.depth() + 1;
            let outer = self.current();
            outer.item_inner = outer.item_inner.max(d);
        }
    }

    /// The bound for the whole statement (unclosed groups count as closed).
    pub fn finish(mut self) -> usize {
        while !self.open.is_empty() {
            self.close();
        }
        self.top.depth()
    }
}

/// Takes RisingWave's `APPEND ONLY` out of a `CREATE TABLE` statement (after its column list):
/// the statement without it, if it was there.
pub fn take_append_only(sql: &str) -> Option<String> {
    let tokens = tokens_with_offsets(sql)?;
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let is = |i: usize, w: &str| matches!(code.get(i).map(|(t, _)| t), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let mut depth = 0i32;
    for i in 0..code.len() {
        match &code[i].0 {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth == 0 && is(i, "APPEND") && is(i + 1, "ONLY") {
            let start = code[i].1;
            let end = code.get(i + 2).map(|(_, at)| *at).unwrap_or(sql.len());
            return Some(format!("{}{}", &sql[..start], &sql[end..]));
        }
    }
    None
}

/// RisingWave's `EMIT ON WINDOW CLOSE` of a `CREATE MATERIALIZED VIEW`, at the end or before
/// its `AS` (`CREATE MATERIALIZED VIEW v EMIT ON WINDOW CLOSE AS SELECT ...`): the statement
/// without it, if it was there.
pub fn take_emit_on_window_close(sql: &str) -> Option<String> {
    let tokens = tokens_with_offsets(sql)?;
    let code: Vec<&(Token, usize)> =
        tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF)).collect();
    let n = code.len();
    let is = |i: usize, w: &str| matches!(code.get(i).map(|(t, _)| t), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let clause = |i: usize| ["EMIT", "ON", "WINDOW", "CLOSE"].iter().enumerate().all(|(j, w)| is(i + j, w));
    if n >= 4 && clause(n - 4) {
        return Some(sql[..code[n - 4].1].trim_end().to_string());
    }
    if !(is(0, "CREATE") && is(1, "MATERIALIZED") && is(2, "VIEW")) {
        return None;
    }
    // Before the first AS (the name, maybe IF NOT EXISTS, comes first).
    let first_as = (3..n).find(|&i| is(i, "AS"))?;
    let at = (3..first_as).find(|&i| clause(i) && i + 4 == first_as)?;
    Some(format!("{}{}", &sql[..code[at].1], &sql[code[first_as].1..]))
}

/// RisingWave's `WATERMARK FOR col AS expr` in the column list of a `CREATE TABLE` or
/// `CREATE SOURCE`: the statement without it, the column as written, and the expression's text.
pub fn take_watermark(sql: &str) -> Option<(String, String, String)> {
    let tokens = tokens_with_offsets(sql)?;
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let is = |i: usize, w: &str| matches!(code.get(i).map(|(t, _)| t), Some(Token::Word(x)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    let at = |i: usize| code.get(i).map(|(_, o)| *o).unwrap_or(sql.len());
    let mut depth = 0i32;
    let mut last_comma: Option<usize> = None;
    for i in 0..code.len() {
        match &code[i].0 {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 1 => last_comma = Some(i),
            _ => {}
        }
        if depth != 1 || !is(i, "WATERMARK") || !is(i + 1, "FOR") || !is(i + 3, "AS") {
            continue;
        }
        let column = match code.get(i + 2).map(|(t, _)| t) {
            Some(Token::Word(w)) if w.quote_style.is_some() => w.value.clone(),
            Some(Token::Word(w)) => w.value.to_lowercase(),
            _ => return None,
        };
        // The expression runs to the next comma or the list's closing parenthesis.
        let mut d = 0i32;
        let mut j = i + 4;
        while j < code.len() {
            match &code[j].0 {
                Token::LParen => d += 1,
                Token::RParen if d == 0 => break,
                Token::RParen => d -= 1,
                Token::Comma if d == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let expr = sql[at(i + 4)..at(j)].trim().to_string();
        let (cut_start, cut_end) = match (last_comma, matches!(code.get(j).map(|(t, _)| t), Some(Token::Comma))) {
            (Some(c), _) => (at(c), at(j)),
            (None, true) => (at(i), at(j + 1)),
            (None, false) => (at(i), at(j)),
        };
        return Some((format!("{}{}", &sql[..cut_start], &sql[cut_end..]), column, expr));
    }
    None
}

/// The code tokens of one statement (whitespace and comments skipped), read front to back by
/// the parsers of Eddy's own statements (`SUBSCRIBE`, `DECLARE ... CURSOR`, `FETCH`, `CLOSE`).
pub struct Code<'a> {
    sql: &'a str,
    tokens: Vec<(Token, usize)>,
    at: usize,
}

impl<'a> Code<'a> {
    /// The tokens of `sql`; text the tokenizer rejects is a syntax error.
    pub fn new(sql: &'a str) -> eddy_common::Result<Self> {
        let tokens = tokens_with_offsets(sql)
            .ok_or_else(|| eddy_common::user_err!(eddy_common::error::sqlstate::SYNTAX_ERROR, "syntax error in \"{sql}\""))?
            .into_iter()
            .filter(|(t, _)| !matches!(t, Token::Whitespace(_) | Token::EOF))
            .collect();
        Ok(Self { sql, tokens, at: 0 })
    }

    /// The next token, if any.
    pub fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    /// The next token, consumed.
    pub fn next_token(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).map(|(t, _)| t.clone());
        self.at += usize::from(t.is_some());
        t
    }

    /// The next token upper-cased if it is an unquoted word.
    pub fn peek_word(&self) -> Option<String> {
        match self.peek() {
            Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
            _ => None,
        }
    }

    /// Consumes the unquoted word `w` (case-insensitive) if it comes next.
    pub fn eat_word(&mut self, w: &str) -> bool {
        let hit = self.peek_word().is_some_and(|p| p.eq_ignore_ascii_case(w));
        self.at += usize::from(hit);
        hit
    }

    /// Consumes `t` if it comes next.
    pub fn eat(&mut self, t: &Token) -> bool {
        let hit = self.peek() == Some(t);
        self.at += usize::from(hit);
        hit
    }

    /// Consumes the unquoted word `w`, or fails with a syntax error naming what came instead.
    pub fn expect_word(&mut self, w: &str) -> eddy_common::Result<()> {
        if self.eat_word(w) {
            return Ok(());
        }
        Err(self.unexpected(w))
    }

    /// Consumes `t`, or fails with a syntax error.
    pub fn expect(&mut self, t: &Token) -> eddy_common::Result<()> {
        if self.eat(t) {
            return Ok(());
        }
        Err(self.unexpected(&t.to_string()))
    }

    /// A syntax error at the next token, which is not what was `wanted`.
    pub fn unexpected(&self, wanted: &str) -> eddy_common::EddyError {
        let found = self.peek().map(|t| format!("\"{t}\"")).unwrap_or_else(|| "end of input".into());
        eddy_common::user_err!(eddy_common::error::sqlstate::SYNTAX_ERROR, "syntax error at or near {found}: expected {wanted}")
    }

    /// An identifier (a word, quoted or not), as written.
    pub fn ident(&mut self) -> eddy_common::Result<datafusion::sql::sqlparser::ast::Ident> {
        match self.peek() {
            Some(Token::Word(w)) => {
                let id = match w.quote_style {
                    Some(q) => datafusion::sql::sqlparser::ast::Ident::with_quote(q, w.value.clone()),
                    None => datafusion::sql::sqlparser::ast::Ident::new(w.value.clone()),
                };
                self.at += 1;
                Ok(id)
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    /// A name as PostgreSQL folds it: lower-cased unless quoted.
    pub fn name(&mut self) -> eddy_common::Result<String> {
        let id = self.ident()?;
        Ok(if id.quote_style.is_some() { id.value } else { id.value.to_lowercase() })
    }

    /// `name [. name ...]`.
    pub fn object_name(&mut self) -> eddy_common::Result<datafusion::sql::sqlparser::ast::ObjectName> {
        let mut parts = vec![self.ident()?];
        while self.eat(&Token::Period) {
            parts.push(self.ident()?);
        }
        Ok(datafusion::sql::sqlparser::ast::ObjectName::from(parts))
    }

    /// True when every token was read.
    pub fn at_end(&self) -> bool {
        self.at >= self.tokens.len()
    }

    /// Fails unless every token was read.
    pub fn expect_end(&self) -> eddy_common::Result<()> {
        if self.at_end() {
            return Ok(());
        }
        Err(self.unexpected("the end of the statement"))
    }

    /// The text from the next token on.
    pub fn rest(&self) -> &'a str {
        self.tokens.get(self.at).map(|(_, at)| &self.sql[*at..]).unwrap_or("")
    }

    /// `( name [= value] [, ...] )`: option names lower-cased, values as written (strings
    /// unquoted; `None` for a bare name).
    pub fn options(&mut self) -> eddy_common::Result<Vec<(String, Option<String>)>> {
        self.expect(&Token::LParen)?;
        let mut out = Vec::new();
        loop {
            let name = self.ident()?.value.to_lowercase();
            let value = if self.eat(&Token::Eq) {
                Some(match self.next_token() {
                    Some(Token::Word(w)) => w.value,
                    Some(Token::SingleQuotedString(s)) => s,
                    Some(Token::Number(n, _)) => n,
                    _ => return Err(eddy_common::user_err!(eddy_common::error::sqlstate::SYNTAX_ERROR, "option {name} needs a value")),
                })
            } else {
                None
            };
            out.push((name, value));
            if self.eat(&Token::RParen) {
                return Ok(out);
            }
            self.expect(&Token::Comma)?;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn emit_on_window_close_is_taken_off_the_end() {
        assert_eq!(
            take_emit_on_window_close("CREATE MATERIALIZED VIEW v AS SELECT 1 FROM t GROUP BY x EMIT ON WINDOW CLOSE;").as_deref(),
            Some("CREATE MATERIALIZED VIEW v AS SELECT 1 FROM t GROUP BY x")
        );
        assert!(take_emit_on_window_close("CREATE MATERIALIZED VIEW v AS SELECT 'EMIT ON WINDOW CLOSE'").is_none());
        assert_eq!(
            take_emit_on_window_close("CREATE MATERIALIZED VIEW IF NOT EXISTS v EMIT ON WINDOW CLOSE AS SELECT 1 FROM t GROUP BY x").as_deref(),
            Some("CREATE MATERIALIZED VIEW IF NOT EXISTS v AS SELECT 1 FROM t GROUP BY x")
        );
        assert!(take_emit_on_window_close("CREATE MATERIALIZED VIEW v AS SELECT emit FROM t").is_none());
    }

    #[test]
    fn a_watermark_clause_is_taken_out_of_the_column_list() {
        let (sql, col, expr) =
            take_watermark("CREATE TABLE t (v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) APPEND ONLY").unwrap();
        assert_eq!(sql, "CREATE TABLE t (v INT, ts TIMESTAMP) APPEND ONLY");
        assert_eq!((col.as_str(), expr.as_str()), ("ts", "ts - INTERVAL '5' SECOND"));
        let (sql, col, expr) = take_watermark("create source s (watermark for \"T\" as \"T\", \"T\" timestamptz) with (x = 1)").unwrap();
        assert_eq!((sql.as_str(), col.as_str(), expr.as_str()), ("create source s (\"T\" timestamptz) with (x = 1)", "T", "\"T\""));
        assert!(take_watermark("CREATE TABLE t (watermark INT)").is_none());
    }

    use super::*;

    fn texts(sql: &str) -> Vec<String> {
        split_statements(sql).into_iter().map(|p| p.text).collect()
    }

    #[test]
    fn semicolons_inside_quotes_and_comments_do_not_split() {
        let s = texts("select 'a;b'; -- c;\n select \"x;\" /* ; */ ; select $$;$$");
        assert_eq!(s.len(), 3);
        assert!(s[0].contains("'a;b'"));
        assert!(s[2].contains("$$;$$"));
    }

    #[test]
    fn an_escaped_quote_in_an_e_string_does_not_end_it() {
        assert_eq!(texts(r"SELECT E'it\'s; x'; SELECT 2"), vec![r"SELECT E'it\'s; x'".to_string(), "SELECT 2".to_string()]);
    }

    #[test]
    fn comment_only_input_has_no_statements() {
        assert!(split_statements("-- ping").is_empty());
        assert!(split_statements(" ; ;").is_empty());
    }

    #[test]
    fn placeholders_are_not_dollar_quotes() {
        assert_eq!(split_statements("select $1; select $2").len(), 2);
    }

    #[test]
    fn leading_words_are_kept_with_their_ends() {
        let p = &split_statements("  verify  Materialized\nview  s.v ;")[0];
        assert!(p.starts_with(&["VERIFY", "MATERIALIZED", "VIEW"]));
        assert_eq!(p.rest_after(3), "s.v");
        assert_eq!(p.text, "verify  Materialized\nview  s.v");
    }

    #[test]
    fn multibyte_text_keeps_its_boundaries() {
        assert_eq!(texts("select 'é€'; select '€€'"), vec!["select 'é€'".to_string(), "select '€€'".to_string()]);
    }

    fn depth(sql: &str) -> usize {
        split_statements(sql)[0].depth
    }

    #[test]
    fn depth_bounds_grow_with_nesting_not_with_list_length() {
        let chain = format!("SELECT {}", vec!["1"; 500].join(" + "));
        assert!(depth(&chain) >= 499);
        let union = vec!["SELECT a, b FROM t"; 300].join(" UNION ALL ");
        assert!((299..310).contains(&depth(&union)), "{}", depth(&union));
        let nested = format!("SELECT {}1{}", "(".repeat(200), ")".repeat(200));
        assert!(depth(&nested) >= 200);
        // Long lists are wide, not deep.
        let values: Vec<String> = (0..5000).map(|i| format!("({i}, 'v{i}', -{i}, NULL)")).collect();
        assert!(depth(&format!("INSERT INTO t VALUES {}", values.join(", "))) < 10);
        let list: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
        assert!(depth(&format!("SELECT * FROM t WHERE a IN ({})", list.join(", "))) < 10);
        // Each statement is bounded on its own; unbalanced parentheses do not underflow.
        let p = split_statements("SELECT ((1; SELECT 1)))");
        assert!(p[0].depth >= 2 && p[1].depth < 5);
    }

    #[test]
    fn a_table_conflict_clause_is_taken_out() {
        let (text, words) = take_table_conflict_clause("CREATE TABLE t (a INT PRIMARY KEY) ON CONFLICT DO UPDATE IF NOT NULL WITH (x = 1)").unwrap();
        assert_eq!(text, "CREATE TABLE t (a INT PRIMARY KEY) WITH (x = 1)");
        assert_eq!(words, vec!["DO", "UPDATE", "IF", "NOT", "NULL"]);
        assert_eq!(take_table_conflict_clause("create table t (a int) on conflict overwrite").unwrap().1, vec!["OVERWRITE"]);
        assert!(take_table_conflict_clause("CREATE TABLE t (a INT CHECK (a > 0))").is_none());
    }

    #[test]
    fn unterminated_quotes_are_one_statement_for_the_parser_to_reject() {
        assert_eq!(texts("select 'abc; select 1"), vec!["select 'abc; select 1".to_string()]);
    }
}
