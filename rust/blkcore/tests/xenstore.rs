// SPDX-License-Identifier: GPL-2.0

//! Property tests for the xenstore value parsers.

use blkcore::xenstore::{
    parse_bool, parse_u32, parse_u64, read_bool, read_u32, read_u64, require_u32, KeyedValues,
    Reason, Side, SliceValues, ValueText, VALUE_TEXT_LEN,
};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any text: no panic, and an accepted number is in canonical form.
    #[test]
    fn any_string_parses_canonically_or_errs(s in any::<String>()) {
        if let Ok(v) = parse_u64(&s) {
            prop_assert_eq!(v.to_string(), s.clone());
        }
        if let Ok(v) = parse_u32(&s) {
            prop_assert_eq!(v.to_string(), s.clone());
        }
        if let Ok(b) = parse_bool(&s) {
            prop_assert_eq!(if b { "1" } else { "0" }, s.as_str());
        }
    }

    /// Strings drawn from the digit alphabet and separators stress the
    /// numeric path (random `String`s rarely are digits).
    #[test]
    fn digit_soup_never_panics(s in "[0-9+\\- \n\u{0}x]{0,30}") {
        match parse_u64(&s) {
            Ok(v) => prop_assert_eq!(v.to_string(), s.clone()),
            Err(r) => prop_assert!(matches!(
                r,
                Reason::Empty | Reason::NotDecimal | Reason::LeadingZero | Reason::Overflow
            )),
        }
    }

    #[test]
    fn u64_round_trips(v in any::<u64>()) {
        prop_assert_eq!(parse_u64(&v.to_string()), Ok(v));
    }

    #[test]
    fn u32_round_trips_and_rejects_wider(v in any::<u32>(), w in (u64::from(u32::MAX) + 1)..=u64::MAX) {
        prop_assert_eq!(parse_u32(&v.to_string()), Ok(v));
        prop_assert_eq!(parse_u32(&w.to_string()), Err(Reason::Overflow));
    }

    /// Junk anywhere in a number is rejected, and the error names the key.
    #[test]
    fn junk_in_number_is_rejected_naming_key(
        v in any::<u32>(),
        junk in "[^0-9]",
        at in any::<prop::sample::Index>(),
    ) {
        let digits = v.to_string();
        let pos = at.index(digits.len() + 1);
        let bad = format!("{}{}{}", &digits[..pos], junk, &digits[pos..]);
        let pairs = [("sector-size", bad.as_str())];
        let kv = SliceValues(&pairs);
        let e = read_u32(&kv, "sector-size").unwrap_err();
        prop_assert_eq!(e.key, "sector-size");
        prop_assert_eq!(e.side, Side::Backend);
        prop_assert_eq!(e.reason, Reason::NotDecimal);
        let msg = e.to_string();
        prop_assert!(msg.starts_with("backend key 'sector-size' = '"), "{}", msg);
        prop_assert!(msg.ends_with("': not an unsigned decimal number"), "{}", msg);
    }

    #[test]
    fn value_text_is_bounded_printable(s in any::<String>()) {
        let t = ValueText::new(&s);
        prop_assert!(t.as_str().len() <= VALUE_TEXT_LEN);
        prop_assert_eq!(t.as_str().len(), s.len().min(VALUE_TEXT_LEN));
        prop_assert!(t.as_str().bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'\'' && b != b'\\'));
        prop_assert_eq!(t.is_truncated(), s.len() > VALUE_TEXT_LEN);
        // "..." is appended exactly when the value was cut (a value that
        // itself ends in "...", such as "...", must not count as cut: a
        // proptest run found that input in the old `ends_with` form).
        let shown = t.to_string();
        let expected = if t.is_truncated() { format!("{}...", t.as_str()) } else { t.as_str().to_string() };
        prop_assert_eq!(shown, expected);
    }
}

#[test]
fn missing_optional_and_mandatory() {
    let kv = SliceValues(&[("info", "0")]);
    assert_eq!(read_u64(&kv, "sectors"), Ok(None));
    assert_eq!(read_bool(&kv, "feature-barrier"), Ok(None));
    let e = require_u32(&kv, "sector-size").unwrap_err();
    assert_eq!(e.reason, Reason::Missing);
    assert_eq!(e.value, ValueText::EMPTY);
    assert_eq!(e.to_string(), "backend key 'sector-size' missing");
}

#[test]
fn keyed_values_first_match_wins() {
    let kv = SliceValues(&[("a", "1"), ("a", "2")]);
    assert_eq!(kv.get("a"), Some("1"));
    assert_eq!(kv.get("b"), None);
}

#[test]
fn bool_error_message() {
    let kv = SliceValues(&[("feature-persistent", "2")]);
    let e = read_bool(&kv, "feature-persistent").unwrap_err();
    assert_eq!(
        e.to_string(),
        "backend key 'feature-persistent' = '2': not a boolean (\"0\" or \"1\")"
    );
}

#[test]
fn a_value_ending_in_dots_is_not_shown_as_cut() {
    let t = ValueText::new("...");
    assert!(!t.is_truncated());
    assert_eq!(t.to_string(), "...");
}
