//! Splits a query string into statements at top-level semicolons, respecting quotes, dollar
//! quotes and comments, so each statement keeps its own source text.

/// The non-empty statements of `sql` (comment-only pieces dropped).
pub fn split_statements(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let mut has_code = false;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => {
                let q = b[i];
                has_code = true;
                i += 1;
                while i < b.len() {
                    if b[i] == q {
                        if i + 1 < b.len() && b[i + 1] == q {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    if q == b'\'' && b[i] == b'\\' && i > 0 && (b[start..i].ends_with(b"E'") || b[start..i].ends_with(b"e'")) {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if i + 1 < b.len() && b[i + 1] == b'-' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if i + 1 < b.len() && b[i + 1] == b'*' => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && i + 1 < b.len() && b[i + 1] == b'/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'$' => {
                has_code = true;
                // $tag$ ... $tag$ (a `$1` placeholder has a digit and no closing `$`).
                let tag_end = b[i + 1..].iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).map(|p| i + 1 + p);
                match tag_end {
                    Some(e) if b[e] == b'$' && !b[i + 1..e].first().is_some_and(|c| c.is_ascii_digit()) => {
                        let tag = &b[i..=e];
                        let body = e + 1;
                        let close = b[body..].windows(tag.len()).position(|w| w == tag);
                        i = match close {
                            Some(p) => body + p + tag.len(),
                            None => b.len(),
                        };
                    }
                    _ => i += 1,
                }
            }
            b';' => {
                if has_code {
                    out.push(sql[start..i].to_string());
                }
                has_code = false;
                i += 1;
                start = i;
            }
            c => {
                if !c.is_ascii_whitespace() {
                    has_code = true;
                }
                i += 1;
            }
        }
    }
    if has_code && start < b.len() {
        out.push(sql[start..].to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semicolons_inside_quotes_and_comments_do_not_split() {
        let s = split_statements("select 'a;b'; -- c;\n select \"x;\" /* ; */ ; select $$;$$");
        assert_eq!(s.len(), 3);
        assert!(s[0].contains("'a;b'"));
        assert!(s[2].contains("$$;$$"));
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
}
