//! Splits a query string into statements at top-level semicolons with sqlparser's tokenizer
//! (so quotes, `E'...'` escapes, dollar quotes, comments and placeholders are read exactly as
//! the parser reads them), keeping each statement's own source text and its leading words.

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
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
        return if text.is_empty() { vec![] } else { vec![Piece { text: text.to_string(), words: vec![], word_ends: vec![] }] };
    };
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut words: Vec<(String, usize)> = Vec::new();
    let mut has_code = false;
    let mut words_open = true;
    let finish = |start: usize, end: usize, words: &mut Vec<(String, usize)>, out: &mut Vec<Piece>| {
        let raw = &sql[start..end];
        let lead = raw.len() - raw.trim_start().len();
        let text = raw.trim();
        let (w, ends): (Vec<String>, Vec<usize>) =
            words.drain(..).map(|(w, e)| (w, e.saturating_sub(start + lead).min(text.len()))).unzip();
        out.push(Piece { text: text.to_string(), words: w, word_ends: ends });
    };
    for (token, at) in &tokens {
        match token {
            Token::Whitespace(_) => {}
            Token::SemiColon => {
                if has_code {
                    finish(start, *at, &mut words, &mut out);
                }
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
        finish(start, sql.len(), &mut words, &mut out);
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

#[cfg(test)]
mod tests {
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
