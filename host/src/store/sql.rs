//! What a statement is made of, for both backends: arguments and cells of
//! two types (integers and text), rows read back, statements written once
//! with `?N` placeholders (`pg_sql` spells them for PostgreSQL).

use super::{Result, StoreError};

/// An argument: typed even when null, since PostgreSQL checks types.
#[derive(Debug, Clone)]
pub enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

/// `args![a, b, ...]`: a `Vec<Arg>`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { vec![$($crate::store::sql::Arg::from($a)),*] };
}
pub(crate) use args;

/// One value read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One row read back, by column position.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Cell>);

impl Row {
    fn cell(&self, i: usize) -> &Cell {
        self.0.get(i).unwrap_or(&Cell::Null)
    }

    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)
            .ok_or_else(|| StoreError::Decode(format!("column {i}: expected text, found null")))
    }

    pub fn opt_text(&self, i: usize) -> Option<String> {
        match self.cell(i) {
            Cell::Text(s) => Some(s.clone()),
            Cell::Int(n) => Some(n.to_string()),
            Cell::Null => None,
        }
    }

    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i).ok_or_else(|| {
            StoreError::Decode(format!(
                "column {i}: expected an integer, found {:?}",
                self.cell(i)
            ))
        })
    }

    pub fn opt_int(&self, i: usize) -> Option<i64> {
        match self.cell(i) {
            Cell::Int(n) => Some(*n),
            Cell::Text(s) => s.parse().ok(),
            Cell::Null => None,
        }
    }
}

/// A statement and its arguments.
pub type Stmt = (&'static str, Vec<Arg>);

/// `?N` → `$N`: statements are written once, in SQLite's spelling.
pub fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == '?' && !quoted && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pg_sql;

    #[test]
    fn placeholders_become_numbered_dollars_outside_quotes() {
        assert_eq!(
            pg_sql("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
    }
}
