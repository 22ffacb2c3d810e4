// SPDX-License-Identifier: GPL-2.0

//! `{:?}` of a rejected value (as a driver log shows a `KeyError` it does
//! not format itself): the sanitised value text in quotes, not the bytes
//! of its buffer.

use blkcore::xenstore::{
    KeyError,
    Reason,
    ValueText, //
};

#[test]
fn value_text_debug_is_the_quoted_sanitised_text() {
    assert_eq!(format!("{:?}", ValueText::new("4096")), "'4096'");
    assert_eq!(format!("{:?}", ValueText::new("a\nb")), "'a?b'");
    assert_eq!(format!("{:?}", ValueText::EMPTY), "''");
    let long = "x".repeat(40);
    assert_eq!(
        format!("{:?}", ValueText::new(&long)),
        format!("'{}...'", "x".repeat(32))
    );
}

#[test]
fn key_error_debug_shows_the_value_quoted() {
    let e = KeyError::backend("sector-size", "3000", Reason::NotPowerOfTwo);
    let shown = format!("{e:?}");
    assert!(shown.contains("key: \"sector-size\""), "{shown}");
    assert!(shown.contains("value: '3000'"), "{shown}");
    assert!(shown.contains("reason: NotPowerOfTwo"), "{shown}");
}
