// SPDX-License-Identifier: GPL-2.0

//! The optional keys that carry more than a flag: each reader checks its
//! key's rules and returns the key's error, which [`negotiate`] turns into
//! the key's default (see [`Ignored`]).

use super::*;

/// `physical-sector-size`: a power of two in `sector_size..=`
/// [`MAX_PHYSICAL_SECTOR_SIZE`]; absent: `sector_size`.
pub(super) fn read_physical_sector_size(
    backend: &impl KeyedValues,
    sector_size: u32,
) -> Result<u32, KeyError> {
    let physical = read_u32(backend, KEY_PHYSICAL_SECTOR_SIZE)?.unwrap_or(sector_size);
    if !physical.is_power_of_two() {
        return Err(err(
            backend,
            KEY_PHYSICAL_SECTOR_SIZE,
            Reason::NotPowerOfTwo,
        ));
    }
    if physical < sector_size {
        return Err(err(
            backend,
            KEY_PHYSICAL_SECTOR_SIZE,
            Reason::LessThan {
                key: KEY_SECTOR_SIZE,
                value: u64::from(sector_size),
            },
        ));
    }
    if physical > MAX_PHYSICAL_SECTOR_SIZE {
        return Err(err(
            backend,
            KEY_PHYSICAL_SECTOR_SIZE,
            Reason::OutOfRange {
                min: u64::from(sector_size),
                max: u64::from(MAX_PHYSICAL_SECTOR_SIZE),
            },
        ));
    }
    Ok(physical)
}

fn at_most_max_hint(backend: &impl KeyedValues, key: &'static str, v: u32) -> Result<(), KeyError> {
    if v > MAX_IO_SIZE_HINT {
        return Err(err(
            backend,
            key,
            Reason::OutOfRange {
                min: 0,
                max: u64::from(MAX_IO_SIZE_HINT),
            },
        ));
    }
    Ok(())
}

/// `minimum-io-size`: a power-of-two multiple of the physical sector size,
/// at most [`MAX_IO_SIZE_HINT`]; absent or 0: `None`.
pub(super) fn read_minimum_io_size(
    backend: &impl KeyedValues,
    physical_sector_size: u32,
) -> Result<Option<u32>, KeyError> {
    let Some(min) = read_u32(backend, KEY_MINIMUM_IO_SIZE)?.filter(|&v| v != 0) else {
        return Ok(None);
    };
    if !min.is_power_of_two() {
        return Err(err(backend, KEY_MINIMUM_IO_SIZE, Reason::NotPowerOfTwo));
    }
    // `checked_rem`: no division-by-zero panic path compiled in (objtool
    // flags it), although the caller's size is a power of two.
    if min.checked_rem(physical_sector_size) != Some(0) {
        return Err(err(
            backend,
            KEY_MINIMUM_IO_SIZE,
            Reason::NotMultipleOf {
                key: KEY_PHYSICAL_SECTOR_SIZE,
                value: u64::from(physical_sector_size),
            },
        ));
    }
    at_most_max_hint(backend, KEY_MINIMUM_IO_SIZE, min)?;
    Ok(Some(min))
}

/// `optimal-io-size`: a multiple of the physical sector size, not below
/// the minimum I/O size, at most [`MAX_IO_SIZE_HINT`]; absent or 0:
/// `None`.
pub(super) fn read_optimal_io_size(
    backend: &impl KeyedValues,
    physical_sector_size: u32,
    minimum_io_size: Option<u32>,
) -> Result<Option<u32>, KeyError> {
    let Some(opt) = read_u32(backend, KEY_OPTIMAL_IO_SIZE)?.filter(|&v| v != 0) else {
        return Ok(None);
    };
    if opt.checked_rem(physical_sector_size) != Some(0) {
        return Err(err(
            backend,
            KEY_OPTIMAL_IO_SIZE,
            Reason::NotMultipleOf {
                key: KEY_PHYSICAL_SECTOR_SIZE,
                value: u64::from(physical_sector_size),
            },
        ));
    }
    if let Some(min) = minimum_io_size {
        if opt < min {
            return Err(err(
                backend,
                KEY_OPTIMAL_IO_SIZE,
                Reason::LessThan {
                    key: KEY_MINIMUM_IO_SIZE,
                    value: u64::from(min),
                },
            ));
        }
    }
    at_most_max_hint(backend, KEY_OPTIMAL_IO_SIZE, opt)?;
    Ok(Some(opt))
}

pub(super) fn read_discard(
    backend: &impl KeyedValues,
    sector_size: u32,
) -> Result<Discard, KeyError> {
    let granularity = read_u32(backend, KEY_DISCARD_GRANULARITY)?.unwrap_or(0);
    // `checked_rem`: the caller validated sector_size != 0, but a panicking
    // path here would still be compiled in (objtool flags it).
    if granularity.checked_rem(sector_size) != Some(0) {
        return Err(err(
            backend,
            KEY_DISCARD_GRANULARITY,
            Reason::NotMultipleOf {
                key: KEY_SECTOR_SIZE,
                value: u64::from(sector_size),
            },
        ));
    }
    let alignment = read_u32(backend, KEY_DISCARD_ALIGNMENT)?.unwrap_or(0);
    if alignment % SECTOR_SIZE != 0 {
        return Err(err(
            backend,
            KEY_DISCARD_ALIGNMENT,
            Reason::NotMultipleOf {
                key: "the sector unit",
                value: u64::from(SECTOR_SIZE),
            },
        ));
    }
    if granularity != 0 && alignment >= granularity {
        return Err(err(
            backend,
            KEY_DISCARD_ALIGNMENT,
            Reason::NotLessThan {
                key: KEY_DISCARD_GRANULARITY,
                value: u64::from(granularity),
            },
        ));
    }
    let secure = read_bool(backend, KEY_DISCARD_SECURE)?.unwrap_or(false);
    Ok(Discard {
        granularity,
        alignment,
        secure,
    })
}
