//! A byte-level scanner for JSON `List` files: finds the elements of the top-level `items`
//! array without parsing (or holding) the whole document.
//!
//! Invariants: the scanner tracks only strings (with escapes) and bracket depth, so it
//! accepts every well-formed JSON document; syntax errors *inside* an element are left to
//! the element's own parse (one bad item, the others go on), while a broken structure (an
//! unterminated string or bracket) ends the scan with an error naming the byte offset.
//! Memory: one element's bytes at a time, at most `max_value` bytes (a larger element ends
//! the scan with an error naming `max_file_bytes`).

use crate::limits::size;
use std::io::{BufRead, BufReader, Read};

/// What the top level of a JSON file holds.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    /// The top level is an array (a bare list of manifests).
    pub top_array: bool,
    /// The top-level object has an `items` array.
    pub has_items: bool,
    /// The top-level `kind`, if a string.
    pub kind: Option<String>,
}

impl Probe {
    /// Whether the file is a `List` whose items are the manifests.
    pub fn is_list(&self) -> bool {
        self.top_array
            || (self.has_items && self.kind.as_deref().is_none_or(|k| k.ends_with("List")))
    }
}

struct Scanner<'r> {
    inner: BufReader<&'r mut dyn Read>,
    pos: u64,
    max_value: usize,
}

impl<'r> Scanner<'r> {
    fn new(reader: &'r mut dyn Read, max_value: u64) -> Scanner<'r> {
        Scanner {
            inner: BufReader::with_capacity(64 * 1024, reader),
            pos: 0,
            max_value: usize::try_from(max_value).unwrap_or(usize::MAX),
        }
    }

    /// Appends a byte of the value being kept, failing past `max_value`.
    fn push(&self, out: &mut Option<&mut Vec<u8>>, b: u8) -> Result<(), String> {
        if let Some(v) = out {
            if v.len() >= self.max_value {
                return Err(format!(
                    "the value at byte {} is larger than max_file_bytes = {}; the rest of the file is not read",
                    self.pos,
                    size(self.max_value as u64)
                ));
            }
            v.push(b);
        }
        Ok(())
    }

    fn peek(&mut self) -> Result<Option<u8>, String> {
        let buf = self
            .inner
            .fill_buf()
            .map_err(|e| format!("cannot read: {e}"))?;
        Ok(buf.first().copied())
    }

    fn bump(&mut self) {
        self.inner.consume(1);
        self.pos += 1;
    }

    fn next(&mut self) -> Result<u8, String> {
        let b = self.peek()?.ok_or_else(|| {
            format!(
                "malformed JSON: unexpected end of file at byte {}",
                self.pos
            )
        })?;
        self.bump();
        Ok(b)
    }

    /// Skips whitespace; returns the next byte without consuming it.
    fn ws(&mut self) -> Result<Option<u8>, String> {
        while let Some(b) = self.peek()? {
            if !b.is_ascii_whitespace() {
                return Ok(Some(b));
            }
            self.bump();
        }
        Ok(None)
    }

    fn expect(&mut self, want: u8) -> Result<(), String> {
        let at = self.pos;
        match self.ws()? {
            Some(b) if b == want => {
                self.bump();
                Ok(())
            }
            other => Err(format!(
                "malformed JSON at byte {at}: expected '{}', found {}",
                want as char,
                other.map_or("end of file".to_string(), |b| format!("'{}'", b as char))
            )),
        }
    }

    /// Consumes a string whose opening quote is next, pushing its raw bytes (quotes
    /// included) to `out`.
    fn string(&mut self, out: &mut Option<&mut Vec<u8>>) -> Result<(), String> {
        let mut escaped = false;
        let quote = self.next()?;
        self.push(out, quote)?;
        loop {
            let b = self.next()?;
            self.push(out, b)?;
            match (escaped, b) {
                (false, b'"') => return Ok(()),
                (false, b'\\') => escaped = true,
                _ => escaped = false,
            }
        }
    }

    /// Consumes one value starting at the next non-space byte.
    fn value(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<(), String> {
        match self.ws()? {
            Some(b'"') => self.string(&mut out),
            Some(b'{') | Some(b'[') => self.nested(&mut out),
            Some(_) => {
                while let Some(b) = self.peek()? {
                    if b.is_ascii_whitespace() || matches!(b, b',' | b']' | b'}') {
                        break;
                    }
                    self.push(&mut out, b)?;
                    self.bump();
                }
                Ok(())
            }
            None => Err(format!(
                "malformed JSON: unexpected end of file at byte {}",
                self.pos
            )),
        }
    }

    fn nested(&mut self, out: &mut Option<&mut Vec<u8>>) -> Result<(), String> {
        let start = self.pos;
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                Some(b'"') => self.string(out)?,
                Some(b) => {
                    self.bump();
                    self.push(out, b)?;
                    match b {
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        return Ok(());
                    }
                }
                None => {
                    return Err(format!(
                        "malformed JSON: value starting at byte {start} is never closed"
                    ))
                }
            }
        }
    }
}

/// Looks at the top level of a JSON file: is it an array, does it have `items`, its `kind`.
/// A structural error after `items` was seen still gives the probe (with the error), so the
/// items before the break can be read.
/// Values kept (`kind`) are at most `max_value` bytes.
pub(crate) fn probe(reader: &mut dyn Read, max_value: u64) -> (Probe, Option<String>) {
    let mut probe = Probe::default();
    let res = probe_into(reader, max_value, &mut probe);
    (probe, res.err())
}

fn probe_into(reader: &mut dyn Read, max_value: u64, probe: &mut Probe) -> Result<(), String> {
    let mut s = Scanner::new(reader, max_value);
    if s.ws()? == Some(b'[') {
        probe.top_array = true;
        return Ok(());
    }
    walk_object(&mut s, &mut |s, key| {
        match (key, s.ws()?) {
            (b"\"items\"", Some(b'[')) => probe.has_items = true,
            (b"\"kind\"", Some(b'"')) => {
                let mut raw = Vec::new();
                s.value(Some(&mut raw))?;
                probe.kind = serde_json::from_slice(&raw).ok();
                return Ok(());
            }
            _ => {}
        }
        s.value(None)
    })
}

/// Calls `each(index, byte offset, bytes)` for every element of the top-level `items`
/// array (or of the top-level array), each at most `max_value` bytes, until `each` returns
/// false.
pub(crate) fn items(
    reader: &mut dyn Read,
    max_value: u64,
    each: &mut ItemFn<'_>,
) -> Result<(), String> {
    let mut s = Scanner::new(reader, max_value);
    if s.ws()? == Some(b'[') {
        return array(&mut s, each);
    }
    walk_object(&mut s, &mut |s, key| match (key, s.ws()?) {
        (b"\"items\"", Some(b'[')) => array(s, each),
        _ => s.value(None),
    })
}

/// Called for each member of the top-level object with the raw key; consumes the value.
type MemberFn<'a> = dyn FnMut(&mut Scanner<'_>, &[u8]) -> Result<(), String> + 'a;

/// Called with `(index, byte offset, bytes)` of each element; false stops the scan.
pub(crate) type ItemFn<'a> = dyn FnMut(usize, u64, &[u8]) -> bool + 'a;

/// Walks the members of the top-level object, calling `member(scanner, raw key)` positioned
/// before each value; `member` must consume the value.
fn walk_object(s: &mut Scanner<'_>, member: &mut MemberFn<'_>) -> Result<(), String> {
    s.expect(b'{')?;
    if s.ws()? == Some(b'}') {
        return Ok(());
    }
    loop {
        let mut key = Vec::new();
        if s.ws()? != Some(b'"') {
            return Err(format!("malformed JSON at byte {}: expected a key", s.pos));
        }
        s.string(&mut Some(&mut key))?;
        s.expect(b':')?;
        member(s, &key)?;
        match s.ws()? {
            Some(b',') => s.bump(),
            Some(b'}') => return Ok(()),
            _ => {
                return Err(format!(
                    "malformed JSON at byte {}: expected ',' or '}}'",
                    s.pos
                ))
            }
        }
    }
}

fn array(s: &mut Scanner<'_>, each: &mut ItemFn<'_>) -> Result<(), String> {
    s.expect(b'[')?;
    if s.ws()? == Some(b']') {
        s.bump();
        return Ok(());
    }
    let mut buf = Vec::new();
    for index in 0.. {
        s.ws()?;
        let start = s.pos;
        buf.clear();
        s.value(Some(&mut buf))?;
        if !each(index, start, &buf) {
            return Ok(());
        }
        match s.ws()? {
            Some(b',') => s.bump(),
            Some(b']') => {
                s.bump();
                return Ok(());
            }
            _ => {
                return Err(format!(
                    "malformed JSON at byte {}: expected ',' or ']' after items[{index}]",
                    s.pos
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Found = Vec<(usize, u64, String)>;

    fn collect(text: &str) -> (Result<(), String>, Found) {
        let mut got = Vec::new();
        let res = items(&mut text.as_bytes(), u64::MAX, &mut |i, at, b| {
            got.push((i, at, String::from_utf8(b.to_vec()).unwrap()));
            true
        });
        (res, got)
    }

    fn probe_text(text: &str) -> (Probe, Option<String>) {
        probe(&mut text.as_bytes(), u64::MAX)
    }

    #[test]
    fn an_item_larger_than_the_cap_ends_the_scan_naming_it() {
        let text = r#"{"items":[{"a":1},{"b":"0123456789"}]}"#;
        let mut got = 0;
        let res = items(&mut text.as_bytes(), 10, &mut |_, _, _| {
            got += 1;
            true
        });
        assert_eq!(got, 1);
        assert!(res.unwrap_err().contains("max_file_bytes = 10 bytes"));
    }

    #[test]
    fn finds_items_with_offsets_before_kind() {
        let text = r#"{"apiVersion":"v1","items":[ {"a":"x]}\"y"}, {"b":[1,{}]} ],"kind":"List"}"#;
        let (res, got) = collect(text);
        res.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].2, r#"{"a":"x]}\"y"}"#);
        assert_eq!(&text[got[1].1 as usize..][..got[1].2.len()], got[1].2);
        let (p, err) = probe_text(text);
        assert_eq!(err, None);
        assert!(p.is_list());
        assert_eq!(p.kind.as_deref(), Some("List"));
    }

    #[test]
    fn single_object_is_not_a_list() {
        let (p, _) = probe_text(r#"{"kind":"Pod","metadata":{"name":"a"}}"#);
        assert!(!p.is_list());
    }

    #[test]
    fn unterminated_structure_is_an_error_after_good_items() {
        let (res, got) = collect(r#"{"items":[{"a":1},{"b":2"#);
        assert_eq!(got.len(), 1);
        assert!(res.unwrap_err().contains("never closed"));
    }
}
