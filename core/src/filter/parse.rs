//! The `$filter` parser: a lexer that reads one token at a time and a recursive-descent
//! parser over it, reporting the first error with its column and what was expected.

use std::str::FromStr;

use chrono::{DateTime, Datelike, Utc};
use uuid::Uuid;

use super::{CompareOp, Filter, MAX_NESTING, ParseError};
use crate::model::Value;

const EXPECTED_OPERATOR: &str = "a comparison operator (eq, ne, gt, ge, lt, le)";
const EXPECTED_OPERAND: &str = "a comparison, `true`, `false`, `not` or `(`";
const EXPECTED_LITERAL: &str = "a literal";
const EXPECTED_PROPERTY: &str = "a property name";
const EXPECTED_INT32: &str = "an Int32 (-2147483648 to 2147483647); add `L` for an Int64";
const EXPECTED_INT64: &str = "an Int64 (-9223372036854775808 to 9223372036854775807)";
const EXPECTED_DOUBLE: &str = "a finite Double (at most ±1.7976931348623157e308)";
const EXPECTED_NUMBER: &str = "a number such as `42`, `42L`, `1.5` or `1e10`";
const EXPECTED_DATETIME: &str = "an RFC 3339 date and time between years 0000 and 9999 in UTC, \
     with at most 9 fractional digits, like `datetime'2008-07-10T00:00:00Z'`";
const EXPECTED_GUID: &str = "a GUID like `guid'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'`";
const EXPECTED_BINARY: &str = "an even number of hex digits, like `X'0aff'`";
const END_OF_FILTER: &str = "end of filter";
/// Longest token text quoted in an error's `found`, in characters.
const MAX_QUOTED_CHARS: usize = 40;

impl Filter {
    /// Parses a table-service `$filter` expression.
    ///
    /// ```
    /// use tablekit_core::filter::{Filter, property_named};
    ///
    /// let f = Filter::parse("PartitionKey eq 'Sales' and Age ge 30")?;
    /// assert_eq!(f, property_named("PartitionKey").eq("Sales") & property_named("Age").ge(30));
    /// # Ok::<(), tablekit_core::ParseError>(())
    /// ```
    ///
    /// # Errors
    /// A [`ParseError`] at the first token that does not fit the grammar (see the
    /// [module docs](crate::filter)), including literals out of their type's range and
    /// filters nested more than [`MAX_NESTING`] levels deep.
    pub fn parse(input: &str) -> Result<Filter, ParseError> {
        let mut parser = Parser::new(input);
        let node = parser.or_expr()?;
        let token = parser.next()?;
        match token.kind {
            Kind::Eof => Ok(node.filter),
            _ => Err(parser.error(&token, "`and`, `or` or end of filter")),
        }
    }
}

impl FromStr for Filter {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Filter::parse(s)
    }
}

/// A filter together with its depth: the most `and`, `or` and `not` nodes on any path
/// from it to a comparison.
struct Node {
    filter: Filter,
    depth: usize,
}

#[derive(Debug)]
enum Kind<'a> {
    LParen,
    RParen,
    And,
    Or,
    Not,
    Op(CompareOp),
    Ident(&'a str),
    Literal(Value),
    /// A character that starts no token; the parser reports it with what it expected.
    Unexpected,
    Eof,
}

/// A token and the byte range of its source text.
#[derive(Debug)]
struct Token<'a> {
    kind: Kind<'a>,
    start: usize,
    end: usize,
}

struct Parser<'a> {
    input: &'a str,
    /// Byte offset of the next unread character; always on a character boundary.
    pos: usize,
    peeked: Option<Token<'a>>,
    /// Parentheses open at the current point; at most [`MAX_NESTING`].
    open_parens: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Parser {
            input,
            pos: 0,
            peeked: None,
            open_parens: 0,
        }
    }

    fn column(&self, byte: usize) -> usize {
        self.input
            .get(..byte)
            .map_or(0, |before| before.chars().count())
            + 1
    }

    fn quote(&self, start: usize, end: usize) -> String {
        let text = self.input.get(start..end).unwrap_or_default();
        if text.chars().count() > MAX_QUOTED_CHARS {
            let shown: String = text.chars().take(MAX_QUOTED_CHARS).collect();
            format!("`{shown}…`")
        } else {
            format!("`{text}`")
        }
    }

    fn error_at(&self, start: usize, end: usize, expected: &str) -> ParseError {
        let found = if start >= self.input.len() {
            END_OF_FILTER.to_owned()
        } else {
            self.quote(start, end)
        };
        ParseError {
            column: self.column(start),
            expected: expected.to_owned(),
            found,
        }
    }

    fn error(&self, token: &Token<'a>, expected: &str) -> ParseError {
        self.error_at(token.start, token.end, expected)
    }

    fn too_deep(&self, token: &Token<'a>) -> ParseError {
        self.error(token, &format!("nesting at most {MAX_NESTING} levels"))
    }

    fn rest(&self) -> &'a str {
        self.input.get(self.pos..).unwrap_or_default()
    }

    fn peek_char(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek(&mut self) -> Result<&Token<'a>, ParseError> {
        let token = match self.peeked.take() {
            Some(token) => token,
            None => self.lex()?,
        };
        Ok(self.peeked.insert(token))
    }

    fn next(&mut self) -> Result<Token<'a>, ParseError> {
        match self.peeked.take() {
            Some(token) => Ok(token),
            None => self.lex(),
        }
    }

    // ---- grammar -------------------------------------------------------------------

    /// `or_expr := and_expr ("or" and_expr)*`, left-associative.
    fn or_expr(&mut self) -> Result<Node, ParseError> {
        let mut left = self.and_expr()?;
        while matches!(self.peek()?.kind, Kind::Or) {
            let op = self.next()?;
            let right = self.and_expr()?;
            left = self.combine(&op, left, right, Filter::Or)?;
        }
        Ok(left)
    }

    /// `and_expr := unary ("and" unary)*`, left-associative.
    fn and_expr(&mut self) -> Result<Node, ParseError> {
        let mut left = self.unary()?;
        while matches!(self.peek()?.kind, Kind::And) {
            let op = self.next()?;
            let right = self.unary()?;
            left = self.combine(&op, left, right, Filter::And)?;
        }
        Ok(left)
    }

    fn combine(
        &self,
        op: &Token<'a>,
        left: Node,
        right: Node,
        make: fn(Box<Filter>, Box<Filter>) -> Filter,
    ) -> Result<Node, ParseError> {
        let depth = left.depth.max(right.depth) + 1;
        if depth > MAX_NESTING {
            return Err(self.too_deep(op));
        }
        Ok(Node {
            filter: make(Box::new(left.filter), Box::new(right.filter)),
            depth,
        })
    }

    /// `unary := "not"* primary`. The `not`s are collected in a loop, so only
    /// parentheses make the parser recurse.
    fn unary(&mut self) -> Result<Node, ParseError> {
        let mut nots = Vec::new();
        while matches!(self.peek()?.kind, Kind::Not) {
            let not = self.next()?;
            if nots.len() == MAX_NESTING {
                return Err(self.too_deep(&not));
            }
            nots.push(not);
        }
        let mut node = self.primary()?;
        for not in nots.iter().rev() {
            node.depth += 1;
            if node.depth > MAX_NESTING {
                return Err(self.too_deep(not));
            }
            node.filter = Filter::Not(Box::new(node.filter));
        }
        Ok(node)
    }

    /// `primary := "(" or_expr ")" | boolean | comparison`; a `true` or `false` followed
    /// by an operator starts a comparison.
    fn primary(&mut self) -> Result<Node, ParseError> {
        let token = self.next()?;
        match token.kind {
            Kind::LParen => {
                if self.open_parens >= MAX_NESTING {
                    return Err(self.too_deep(&token));
                }
                self.open_parens += 1;
                let node = self.or_expr()?;
                let close = self.next()?;
                if !matches!(close.kind, Kind::RParen) {
                    return Err(self.error(&close, "`and`, `or` or `)`"));
                }
                self.open_parens -= 1;
                Ok(node)
            }
            Kind::Ident(property) => {
                let op = self.operator()?;
                let literal = self.next()?;
                match literal.kind {
                    Kind::Literal(value) => Ok(comparison(property, op, value)),
                    _ => Err(self.error(&literal, EXPECTED_LITERAL)),
                }
            }
            Kind::Literal(Value::Boolean(value)) if !matches!(self.peek()?.kind, Kind::Op(_)) => {
                Ok(Node {
                    filter: Filter::Literal(value),
                    depth: 0,
                })
            }
            Kind::Literal(value) => {
                let op = self.operator()?;
                let property = self.next()?;
                match property.kind {
                    Kind::Ident(property) => Ok(comparison(property, flip(op), value)),
                    _ => Err(self.error(&property, EXPECTED_PROPERTY)),
                }
            }
            _ => Err(self.error(&token, EXPECTED_OPERAND)),
        }
    }

    fn operator(&mut self) -> Result<CompareOp, ParseError> {
        let token = self.next()?;
        match token.kind {
            Kind::Op(op) => Ok(op),
            _ => Err(self.error(&token, EXPECTED_OPERATOR)),
        }
    }

    // ---- lexer ---------------------------------------------------------------------

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r']);
        self.pos += rest.len() - trimmed.len();
    }

    /// Advances past characters while `keep` holds; returns the new position.
    fn advance_while(&mut self, keep: impl Fn(char) -> bool) -> usize {
        let rest = self.rest();
        let taken = rest.find(|c| !keep(c)).unwrap_or(rest.len());
        self.pos += taken;
        self.pos
    }

    fn advance_char(&mut self) {
        if let Some(c) = self.peek_char() {
            self.pos += c.len_utf8();
        }
    }

    fn token(&self, kind: Kind<'a>, start: usize) -> Token<'a> {
        Token {
            kind,
            start,
            end: self.pos,
        }
    }

    fn lex(&mut self) -> Result<Token<'a>, ParseError> {
        self.skip_whitespace();
        let start = self.pos;
        let Some(c) = self.peek_char() else {
            return Ok(self.token(Kind::Eof, start));
        };
        match c {
            '(' => {
                self.advance_char();
                Ok(self.token(Kind::LParen, start))
            }
            ')' => {
                self.advance_char();
                Ok(self.token(Kind::RParen, start))
            }
            '\'' => {
                let text = self.quoted()?;
                Ok(self.token(Kind::Literal(Value::String(text)), start))
            }
            '-' | '0'..='9' => self.number(),
            c if is_ident_start(c) => self.word(),
            _ => {
                self.advance_char();
                Ok(self.token(Kind::Unexpected, start))
            }
        }
    }

    /// Reads a `'…'` string starting at the current position, `''` standing for one `'`.
    fn quoted(&mut self) -> Result<String, ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            let rest = self.rest();
            let Some(quote) = rest.find('\'') else {
                self.pos = self.input.len();
                let expected = format!(
                    "`'` to close the string that starts at column {}",
                    self.column(open)
                );
                return Err(self.error_at(self.pos, self.pos, &expected));
            };
            text.push_str(rest.get(..quote).unwrap_or_default());
            self.pos += quote + 1;
            if self.peek_char() == Some('\'') {
                text.push('\'');
                self.pos += 1;
            } else {
                return Ok(text);
            }
        }
    }

    /// Reads an identifier, a keyword, a word literal, or a typed literal such as
    /// `datetime'…'`. Keywords, `true`, `false` and the type prefixes are read in any
    /// case; `NaN` and `INF` only as spelled.
    fn word(&mut self) -> Result<Token<'a>, ParseError> {
        let start = self.pos;
        let end = self.advance_while(is_ident_continue);
        let word = self.input.get(start..end).unwrap_or_default();
        let lower = word.to_ascii_lowercase();
        if self.peek_char() == Some('\'')
            && matches!(lower.as_str(), "datetime" | "guid" | "x" | "binary")
        {
            let body = self.quoted()?;
            let value = match lower.as_str() {
                "datetime" => parse_datetime(&body).map(Value::DateTime),
                "guid" => parse_guid(&body).map(Value::Guid),
                _ => parse_hex(&body).map(Value::Binary),
            };
            return match value {
                Ok(value) => Ok(self.token(Kind::Literal(value), start)),
                Err(expected) => Err(self.error_at(start, self.pos, expected)),
            };
        }
        let kind = match lower.as_str() {
            "and" => Kind::And,
            "or" => Kind::Or,
            "not" => Kind::Not,
            "eq" => Kind::Op(CompareOp::Eq),
            "ne" => Kind::Op(CompareOp::Ne),
            "gt" => Kind::Op(CompareOp::Gt),
            "ge" => Kind::Op(CompareOp::Ge),
            "lt" => Kind::Op(CompareOp::Lt),
            "le" => Kind::Op(CompareOp::Le),
            "true" => Kind::Literal(Value::Boolean(true)),
            "false" => Kind::Literal(Value::Boolean(false)),
            _ if word == "NaN" => Kind::Literal(Value::Double(f64::NAN)),
            _ if word == "INF" => Kind::Literal(Value::Double(f64::INFINITY)),
            _ => Kind::Ident(word),
        };
        Ok(self.token(kind, start))
    }

    /// Reads `-INF` or a number: `-?digits` (Int32), with `L`/`l` (Int64), or with a
    /// fraction, an exponent and/or a `D`/`d` suffix (Double).
    fn number(&mut self) -> Result<Token<'a>, ParseError> {
        let start = self.pos;
        if self.peek_char() == Some('-') {
            self.pos += 1;
            if self.rest().starts_with("INF") {
                self.pos += 3;
                if !self.peek_char().is_some_and(is_ident_continue) {
                    return Ok(self.token(Kind::Literal(Value::Double(f64::NEG_INFINITY)), start));
                }
            }
        }
        let digits_start = self.pos;
        let mut well_formed = self.advance_while(|c| c.is_ascii_digit()) > digits_start;
        let mut double = false;
        if well_formed && self.peek_char() == Some('.') {
            double = true;
            self.pos += 1;
            let fraction = self.pos;
            well_formed = self.advance_while(|c| c.is_ascii_digit()) > fraction;
        }
        if well_formed && matches!(self.peek_char(), Some('e' | 'E')) {
            double = true;
            self.pos += 1;
            if matches!(self.peek_char(), Some('+' | '-')) {
                self.pos += 1;
            }
            let exponent = self.pos;
            well_formed = self.advance_while(|c| c.is_ascii_digit()) > exponent;
        }
        let digits_end = self.pos;
        let long = well_formed && !double && matches!(self.peek_char(), Some('L' | 'l'));
        // OData's Double suffix: `5d` and `1.5D` are the Doubles 5.0 and 1.5.
        let suffixed = well_formed && !long && matches!(self.peek_char(), Some('D' | 'd'));
        double |= suffixed;
        if long || suffixed {
            self.pos += 1;
        }
        if !well_formed
            || self
                .peek_char()
                .is_some_and(|c| is_ident_continue(c) || c == '.')
        {
            let end = self.advance_while(|c| is_ident_continue(c) || matches!(c, '.' | '+' | '-'));
            return Err(self.error_at(start, end.max(start + 1), EXPECTED_NUMBER));
        }
        let text = self.input.get(start..digits_end).unwrap_or_default();
        let value = if double {
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Value::Double(v)),
                _ => Err(EXPECTED_DOUBLE),
            }
        } else if long {
            text.parse::<i64>()
                .map(Value::Int64)
                .map_err(|_| EXPECTED_INT64)
        } else {
            text.parse::<i32>()
                .map(Value::Int32)
                .map_err(|_| EXPECTED_INT32)
        };
        match value {
            Ok(value) => Ok(self.token(Kind::Literal(value), start)),
            Err(expected) => Err(self.error_at(start, self.pos, expected)),
        }
    }
}

fn comparison(property: &str, op: CompareOp, value: Value) -> Node {
    Node {
        filter: Filter::Compare {
            property: property.to_owned(),
            op,
            value,
        },
        depth: 0,
    }
}

/// The operator that keeps a comparison's meaning when its operands swap sides.
fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Eq => CompareOp::Eq,
        CompareOp::Ne => CompareOp::Ne,
        CompareOp::Gt => CompareOp::Lt,
        CompareOp::Ge => CompareOp::Le,
        CompareOp::Lt => CompareOp::Gt,
        CompareOp::Le => CompareOp::Ge,
    }
}

fn parse_datetime(text: &str) -> Result<DateTime<Utc>, &'static str> {
    // chrono accepts any number of fractional digits and drops those past nine
    // (nanoseconds); a longer fraction is rejected rather than silently truncated.
    if let Some((_, after_dot)) = text.split_once('.') {
        let fraction = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if fraction > 9 {
            return Err(EXPECTED_DATETIME);
        }
    }
    let parsed = DateTime::parse_from_rfc3339(text).map_err(|_| EXPECTED_DATETIME)?;
    let utc = parsed.with_timezone(&Utc);
    // The formatter writes four-digit years; outside them RFC 3339 has no spelling.
    if (0..=9999).contains(&utc.year()) {
        Ok(utc)
    } else {
        Err(EXPECTED_DATETIME)
    }
}

fn parse_guid(text: &str) -> Result<Uuid, &'static str> {
    let hyphenated = text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !hyphenated {
        return Err(EXPECTED_GUID);
    }
    Uuid::try_parse(text).map_err(|_| EXPECTED_GUID)
}

fn parse_hex(text: &str) -> Result<Vec<u8>, &'static str> {
    if !text.len().is_multiple_of(2) {
        return Err(EXPECTED_BINARY);
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(high), Some(low)) => Ok(high << 4 | low),
            _ => Err(EXPECTED_BINARY),
        })
        .collect()
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
