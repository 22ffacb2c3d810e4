// SPDX-License-Identifier: GPL-2.0

//! Strict parsers for xenstore values, and the error type that names the
//! offending key and value.
//!
//! `xenbus_read()` hands back the node's bytes, NUL-terminated, with no
//! trailing newline; the glue strips the NUL and passes the text here. The
//! grammar we accept is therefore exact:
//!
//! * unsigned integers: one or more ASCII digits `0-9`, no sign, no
//!   whitespace, no trailing NUL or newline, no `0x` prefix and no leading
//!   zero unless the value is exactly `"0"` (a leading zero is how `%i` /
//!   `kstrtou*(.., 0, ..)` spell octal, so `"010"` is ambiguous: rejected);
//!   the value must fit the target type;
//! * booleans: exactly `"0"` or `"1"`.
//!
//! Upstream xen-blkfront parses with `sscanf("%u")` through
//! `xenbus_read_unsigned()` and silently falls back to the default on junk
//! (and accepts `" 12abc"` as 12). We reject instead, with an error that
//! names the key and shows the value, so a broken backend or toolstack is
//! visible in `dmesg` rather than half-working.

use core::fmt;

/// Bytes of an offending value kept in a [`ValueText`].
pub const VALUE_TEXT_LEN: usize = 32;

/// Source of xenstore values: one directory (the backend's, or the
/// frontend's own) whose nodes the kernel glue has already read.
///
/// The kernel glue implements it over the values it read with
/// `xenbus_read()`; host tests and the fuzz targets use [`SliceValues`].
pub trait KeyedValues {
    /// The text of node `key` (a name relative to the directory), without
    /// its terminating NUL, or `None` if the node does not exist.
    ///
    /// A value that is not UTF-8 should be passed through
    /// [`utf8_or_invalid`], so the parser rejects it with the key's name.
    fn get(&self, key: &str) -> Option<&str>;
}

/// Key/value pairs in a slice: a [`KeyedValues`] without allocation. The
/// first pair with a matching key wins.
#[derive(Clone, Copy, Debug)]
pub struct SliceValues<'a>(pub &'a [(&'a str, &'a str)]);

impl KeyedValues for SliceValues<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// Marker text returned by [`utf8_or_invalid`] for bytes that are not UTF-8.
pub const INVALID_UTF8: &str = "\u{fffd}";

/// `bytes` as text, or [`INVALID_UTF8`] (which every parser here rejects)
/// when they are not valid UTF-8. For glue code that reads raw node bytes.
pub fn utf8_or_invalid(bytes: &[u8]) -> &str {
    core::str::from_utf8(bytes).unwrap_or(INVALID_UTF8)
}

/// Fixed-size, printable copy of an offending value, for error messages
/// without allocation: at most [`VALUE_TEXT_LEN`] bytes, every byte outside
/// printable ASCII (and `'`, `\\`) replaced by `?`, and a note when truncated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ValueText {
    buf: [u8; VALUE_TEXT_LEN],
    len: u8,
    truncated: bool,
}

impl ValueText {
    /// The empty text (used for a missing key).
    pub const EMPTY: ValueText = ValueText {
        buf: [0; VALUE_TEXT_LEN],
        len: 0,
        truncated: false,
    };

    /// Copy (and sanitise) up to [`VALUE_TEXT_LEN`] bytes of `s`.
    pub fn new(s: &str) -> Self {
        let mut t = Self::EMPTY;
        let bytes = s.as_bytes();
        for (dst, &b) in t.buf.iter_mut().zip(bytes.iter()) {
            *dst = if (0x20..0x7f).contains(&b) && b != b'\'' && b != b'\\' {
                b
            } else {
                b'?'
            };
        }
        let n = bytes.len().min(VALUE_TEXT_LEN);
        // n <= VALUE_TEXT_LEN = 32, always fits a u8.
        t.len = u8::try_from(n).unwrap_or(u8::MAX);
        t.truncated = bytes.len() > VALUE_TEXT_LEN;
        t
    }

    /// The sanitised text (always ASCII).
    pub fn as_str(&self) -> &str {
        let bytes = self.buf.get(..usize::from(self.len)).unwrap_or(&[]);
        core::str::from_utf8(bytes).unwrap_or("")
    }

    /// True when the original value was longer than [`VALUE_TEXT_LEN`].
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for ValueText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ValueText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{self}'")
    }
}

/// Why a value was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A mandatory key does not exist.
    Missing,
    /// The value is the empty string.
    Empty,
    /// A character other than an ASCII digit (sign, space, NUL, newline,
    /// `x`, ...).
    NotDecimal,
    /// More than one digit and the first is `0` (octal-looking).
    LeadingZero,
    /// The number does not fit the type the key is read into.
    Overflow,
    /// A boolean key that is not exactly `"0"` or `"1"`.
    NotBoolean,
    /// Must be a power of two.
    NotPowerOfTwo,
    /// Outside the inclusive range `min..=max`.
    OutOfRange {
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// Must be a multiple of another key's value.
    NotMultipleOf {
        /// The other key.
        key: &'static str,
        /// Its (effective) value.
        value: u64,
    },
    /// Must not be smaller than another key's value.
    LessThan {
        /// The other key.
        key: &'static str,
        /// Its (effective) value.
        value: u64,
    },
    /// Must be smaller than another key's value.
    NotLessThan {
        /// The other key.
        key: &'static str,
        /// Its (effective) value.
        value: u64,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::Missing => f.write_str("missing"),
            Reason::Empty => f.write_str("empty"),
            Reason::NotDecimal => f.write_str("not an unsigned decimal number"),
            Reason::LeadingZero => f.write_str("leading zero (ambiguous octal)"),
            Reason::Overflow => f.write_str("too large"),
            Reason::NotBoolean => f.write_str("not a boolean (\"0\" or \"1\")"),
            Reason::NotPowerOfTwo => f.write_str("not a power of two"),
            Reason::OutOfRange { min, max } => write!(f, "out of range {min}..={max}"),
            Reason::NotMultipleOf { key, value } => {
                write!(f, "not a multiple of {key} ({value})")
            }
            Reason::LessThan { key, value } => write!(f, "less than {key} ({value})"),
            Reason::NotLessThan { key, value } => {
                write!(f, "not less than {key} ({value})")
            }
        }
    }
}

/// Which xenstore directory a key was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The backend's directory (`otherend`).
    Backend,
    /// The frontend's own directory (`nodename`).
    Frontend,
}

/// A rejected xenstore value. Displays as, e.g.,
/// `backend key 'physical-sector-size' = '3000': not a power of two`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyError {
    /// Directory the key was read from.
    pub side: Side,
    /// The key.
    pub key: &'static str,
    /// A printable copy of the value (empty when [`Reason::Missing`]).
    pub value: ValueText,
    /// What is wrong with it.
    pub reason: Reason,
}

impl KeyError {
    /// An error about backend key `key` holding `value`.
    pub fn backend(key: &'static str, value: &str, reason: Reason) -> Self {
        KeyError {
            side: Side::Backend,
            key,
            value: ValueText::new(value),
            reason,
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Backend => "backend",
            Side::Frontend => "frontend",
        };
        if self.reason == Reason::Missing {
            write!(f, "{side} key '{}' missing", self.key)
        } else {
            write!(
                f,
                "{side} key '{}' = '{}': {}",
                self.key, self.value, self.reason
            )
        }
    }
}

/// Parse an unsigned decimal `u64` (grammar in the module docs).
pub fn parse_u64(s: &str) -> Result<u64, Reason> {
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return Err(Reason::Empty);
    }
    if !bytes.iter().all(u8::is_ascii_digit) {
        return Err(Reason::NotDecimal);
    }
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return Err(Reason::LeadingZero);
    }
    let mut v: u64 = 0;
    for &b in bytes {
        let digit = u64::from(b.wrapping_sub(b'0'));
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(digit))
            .ok_or(Reason::Overflow)?;
    }
    Ok(v)
}

/// Parse an unsigned decimal `u32` (grammar in the module docs).
pub fn parse_u32(s: &str) -> Result<u32, Reason> {
    u32::try_from(parse_u64(s)?).map_err(|_| Reason::Overflow)
}

/// Parse a boolean: exactly `"0"` (false) or `"1"` (true).
pub fn parse_bool(s: &str) -> Result<bool, Reason> {
    match s {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(Reason::NotBoolean),
    }
}

fn read_with<T>(
    kv: &impl KeyedValues,
    side: Side,
    key: &'static str,
    parse: fn(&str) -> Result<T, Reason>,
) -> Result<Option<T>, KeyError> {
    match kv.get(key) {
        None => Ok(None),
        Some(s) => parse(s).map(Some).map_err(|reason| KeyError {
            side,
            key,
            value: ValueText::new(s),
            reason,
        }),
    }
}

/// Read optional backend key `key` as a `u32`: `Ok(None)` when absent.
pub fn read_u32(kv: &impl KeyedValues, key: &'static str) -> Result<Option<u32>, KeyError> {
    read_with(kv, Side::Backend, key, parse_u32)
}

/// Read optional backend key `key` as a `u64`: `Ok(None)` when absent.
pub fn read_u64(kv: &impl KeyedValues, key: &'static str) -> Result<Option<u64>, KeyError> {
    read_with(kv, Side::Backend, key, parse_u64)
}

/// Read optional backend key `key` as a boolean: `Ok(None)` when absent.
pub fn read_bool(kv: &impl KeyedValues, key: &'static str) -> Result<Option<bool>, KeyError> {
    read_with(kv, Side::Backend, key, parse_bool)
}

/// Read optional key `key` from the frontend's own directory as a boolean.
pub fn read_frontend_bool(
    kv: &impl KeyedValues,
    key: &'static str,
) -> Result<Option<bool>, KeyError> {
    read_with(kv, Side::Frontend, key, parse_bool)
}

fn missing(key: &'static str) -> KeyError {
    KeyError {
        side: Side::Backend,
        key,
        value: ValueText::EMPTY,
        reason: Reason::Missing,
    }
}

/// Read mandatory backend key `key` as a `u32`; [`Reason::Missing`] if absent.
pub fn require_u32(kv: &impl KeyedValues, key: &'static str) -> Result<u32, KeyError> {
    read_u32(kv, key)?.ok_or_else(|| missing(key))
}

/// Read mandatory backend key `key` as a `u64`; [`Reason::Missing`] if absent.
pub fn require_u64(kv: &impl KeyedValues, key: &'static str) -> Result<u64, KeyError> {
    read_u64(kv, key)?.ok_or_else(|| missing(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::ToString;

    #[test]
    fn integers() {
        assert_eq!(parse_u32("0"), Ok(0));
        assert_eq!(parse_u32("512"), Ok(512));
        assert_eq!(parse_u32("4294967295"), Ok(u32::MAX));
        assert_eq!(parse_u32("4294967296"), Err(Reason::Overflow));
        assert_eq!(parse_u64("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64("18446744073709551616"), Err(Reason::Overflow));
        assert_eq!(parse_u64("99999999999999999999999"), Err(Reason::Overflow));
        assert_eq!(parse_u32(""), Err(Reason::Empty));
        for bad in [
            "+1", "-1", " 1", "1 ", "1\n", "1\0", "0x10", "1a", "١", "1.0", "1e3",
        ] {
            assert_eq!(parse_u32(bad), Err(Reason::NotDecimal), "{bad:?}");
        }
        assert_eq!(parse_u32("010"), Err(Reason::LeadingZero));
        assert_eq!(parse_u32("00"), Err(Reason::LeadingZero));
    }

    #[test]
    fn booleans() {
        assert_eq!(parse_bool("0"), Ok(false));
        assert_eq!(parse_bool("1"), Ok(true));
        for bad in ["", "2", "01", "true", "1\n", " 1", "yes"] {
            assert_eq!(parse_bool(bad), Err(Reason::NotBoolean), "{bad:?}");
        }
    }

    #[test]
    fn value_text_sanitises_and_truncates() {
        let t = ValueText::new("a\nb'c\\d\u{e9}");
        assert_eq!(t.as_str(), "a?b?c?d??");
        assert!(!t.is_truncated());
        let long = "0123456789012345678901234567890123456789";
        let t = ValueText::new(long);
        assert_eq!(t.as_str(), &long[..VALUE_TEXT_LEN]);
        assert!(t.is_truncated());
        assert_eq!(t.to_string(), format!("{}...", &long[..VALUE_TEXT_LEN]));
        assert_eq!(ValueText::EMPTY.as_str(), "");
    }

    #[test]
    fn error_display() {
        let e = KeyError::backend("physical-sector-size", "3000", Reason::NotPowerOfTwo);
        assert_eq!(
            e.to_string(),
            "backend key 'physical-sector-size' = '3000': not a power of two"
        );
        let kv = SliceValues(&[]);
        let e = require_u64(&kv, "sectors").unwrap_err();
        assert_eq!(e.to_string(), "backend key 'sectors' missing");
        let kv = SliceValues(&[("trusted", "yes")]);
        let e = read_frontend_bool(&kv, "trusted").unwrap_err();
        assert_eq!(
            e.to_string(),
            "frontend key 'trusted' = 'yes': not a boolean (\"0\" or \"1\")"
        );
    }

    #[test]
    fn readers() {
        let kv = SliceValues(&[("a", "7"), ("b", "x"), ("a", "8"), ("c", "1")]);
        assert_eq!(read_u32(&kv, "a"), Ok(Some(7)));
        assert_eq!(read_u32(&kv, "zz"), Ok(None));
        assert_eq!(read_bool(&kv, "c"), Ok(Some(true)));
        let e = read_u64(&kv, "b").unwrap_err();
        assert_eq!((e.key, e.reason), ("b", Reason::NotDecimal));
        assert_eq!(e.value.as_str(), "x");
        assert_eq!(require_u32(&kv, "a"), Ok(7));
        assert_eq!(utf8_or_invalid(b"12"), "12");
        assert_eq!(utf8_or_invalid(&[0xff, 0x31]), INVALID_UTF8);
        assert_eq!(parse_u32(utf8_or_invalid(&[0xff])), Err(Reason::NotDecimal));
    }
}
