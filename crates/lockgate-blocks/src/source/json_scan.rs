//! A byte-level scanner for JSON `List` files: finds the elements of the top-level `items`
//! array without parsing (or holding) the whole document.
//!
//! Invariants: the scanner tracks only strings (with escapes) and bracket depth, so it
//! accepts every well-formed JSON document; syntax errors *inside* an element are left to
//! the element's own parse (one bad item, the others go on), while a broken structure (an
//! unterminated string or bracket) ends the scan with an error naming the byte offset.
//! Memory: one element's bytes at a time.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What the top level of a JSON file holds.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    /// The top level is an array (a bare list of manifests).
    pub top_array: bool,
    /// The top-level object has an `items` array.
    pub has_items: bool,
    /// The top-level `kind`, if a string.
    pub kind: Option<String>,
    /// File length in bytes.
    pub len: u64,
}

impl Probe {
    /// Whether the file is a `List` whose items are the manifests.
    pub fn is_list(&self) -> bool {
        self.top_array
            || (self.has_items && self.kind.as_deref().is_none_or(|k| k.ends_with("List")))
    }
}

struct Scanner {
    inner: BufReader<File>,
    pos: u64,
}

impl Scanner {
    fn open(path: &Path) -> Result<Scanner, String> {
        let file = File::open(path).map_err(|e| format!("cannot read: {e}"))?;
        Ok(Scanner {
            inner: BufReader::with_capacity(64 * 1024, file),
            pos: 0,
        })
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
        push(out, quote);
        loop {
            let b = self.next()?;
            push(out, b);
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
                    push(&mut out, b);
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
                    push(out, b);
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

fn push(out: &mut Option<&mut Vec<u8>>, b: u8) {
    if let Some(v) = out {
        v.push(b);
    }
}

/// Looks at the top level of a JSON file: is it an array, does it have `items`, its `kind`.
/// A structural error after `items` was seen still gives the probe (with the error), so the
/// items before the break can be read.
pub(crate) fn probe(path: &Path) -> (Probe, Option<String>) {
    let mut probe = Probe::default();
    let res = probe_into(path, &mut probe);
    (probe, res.err())
}

fn probe_into(path: &Path, probe: &mut Probe) -> Result<(), String> {
    probe.len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read: {e}"))?
        .len();
    let mut s = Scanner::open(path)?;
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
/// array (or of the top-level array).
pub(crate) fn items(path: &Path, each: &mut dyn FnMut(usize, u64, &[u8])) -> Result<(), String> {
    let mut s = Scanner::open(path)?;
    if s.ws()? == Some(b'[') {
        return array(&mut s, each);
    }
    walk_object(&mut s, &mut |s, key| match (key, s.ws()?) {
        (b"\"items\"", Some(b'[')) => array(s, each),
        _ => s.value(None),
    })
}

/// Called for each member of the top-level object with the raw key; consumes the value.
type MemberFn<'a> = dyn FnMut(&mut Scanner, &[u8]) -> Result<(), String> + 'a;

/// Walks the members of the top-level object, calling `member(scanner, raw key)` positioned
/// before each value; `member` must consume the value.
fn walk_object(s: &mut Scanner, member: &mut MemberFn<'_>) -> Result<(), String> {
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

fn array(s: &mut Scanner, each: &mut dyn FnMut(usize, u64, &[u8])) -> Result<(), String> {
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
        each(index, start, &buf);
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
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    type Found = Vec<(usize, u64, String)>;

    fn collect(text: &str) -> (Result<(), String>, Found) {
        let f = file(text);
        let mut got = Vec::new();
        let res = items(f.path(), &mut |i, at, b| {
            got.push((i, at, String::from_utf8(b.to_vec()).unwrap()))
        });
        (res, got)
    }

    #[test]
    fn finds_items_with_offsets_before_kind() {
        let text = r#"{"apiVersion":"v1","items":[ {"a":"x]}\"y"}, {"b":[1,{}]} ],"kind":"List"}"#;
        let (res, got) = collect(text);
        res.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].2, r#"{"a":"x]}\"y"}"#);
        assert_eq!(&text[got[1].1 as usize..][..got[1].2.len()], got[1].2);
        let (p, err) = probe(file(text).path());
        assert_eq!(err, None);
        assert!(p.is_list());
        assert_eq!(p.kind.as_deref(), Some("List"));
    }

    #[test]
    fn single_object_is_not_a_list() {
        let (p, _) = probe(file(r#"{"kind":"Pod","metadata":{"name":"a"}}"#).path());
        assert!(!p.is_list());
    }

    #[test]
    fn unterminated_structure_is_an_error_after_good_items() {
        let (res, got) = collect(r#"{"items":[{"a":1},{"b":2"#);
        assert_eq!(got.len(), 1);
        assert!(res.unwrap_err().contains("never closed"));
    }
}
