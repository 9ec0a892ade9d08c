//! The `serves` field of the C ABI (`MFS_SERVES_*` bits, a `u32` at the
//! boundary) and the host's typed set, [`Serves`]: converted here, once,
//! where a descriptor is read, with the bits this host does not know kept
//! apart so the loader can say so.

use mfstream_plugin::abi::{MFS_SERVES_AGGREGATE, MFS_SERVES_POSITIONS, MFS_SERVES_TRANSFORM};

use crate::Serves;

/// Each ABI bit and the kind it names.
const BITS: [(u32, Serves); 2] = [
    (MFS_SERVES_TRANSFORM, Serves::TRANSFORM),
    (MFS_SERVES_AGGREGATE, Serves::AGGREGATE),
];

/// The `serves` bits of a descriptor: the kinds this host knows, and the
/// bits it does not (a newer plugin's), which the caller reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declared {
    /// The kinds declared that this host knows.
    pub known: Serves,
    /// Positions declared (`MFS_SERVES_POSITIONS`, version 3 on).
    pub positions: bool,
    /// The other bits set, 0 when none.
    pub unknown: u32,
}

/// Reads the `serves` bits of a descriptor of ABI version `abi_version`:
/// `MFS_SERVES_POSITIONS` means positions from version 3 on, and is an
/// unknown bit before.
pub(crate) fn from_abi(bits: u32, abi_version: u32) -> Declared {
    let mut known = Serves::NONE;
    let mut rest = bits;
    let positions = abi_version >= 3 && bits & MFS_SERVES_POSITIONS != 0;
    if positions {
        rest &= !MFS_SERVES_POSITIONS;
    }
    for (bit, kind) in BITS {
        if bits & bit != 0 {
            known = known | kind;
            rest &= !bit;
        }
    }
    Declared {
        known,
        positions,
        unknown: rest,
    }
}

/// The `serves` bits of `serves` (and positions), as the ABI writes them.
pub(crate) fn to_abi(serves: Serves, positions: bool) -> u32 {
    let bits = BITS
        .into_iter()
        .filter(|(_, kind)| serves.contains(*kind))
        .fold(0, |bits, (bit, _)| bits | bit);
    if positions {
        bits | MFS_SERVES_POSITIONS
    } else {
        bits
    }
}

/// What an engine of a plugin serves, from what it declared: every plugin
/// engine transforms (the loader refuses one that does not), and the host
/// windows its outputs for aggregates, whether or not it declared
/// `MFS_SERVES_AGGREGATE` (reserved: no host asks a plugin to aggregate);
/// positions when it declared them (ABI version 3, with `open_positions`).
pub(crate) fn engine_serves(declared: Serves, positions: bool) -> Serves {
    let serves = if declared.contains(Serves::TRANSFORM) {
        Serves::TRANSFORM | Serves::AGGREGATE
    } else {
        return Serves::NONE;
    };
    if positions {
        serves | Serves::POSITIONS
    } else {
        serves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bits_become_kinds_and_unknown_ones_are_kept_apart() {
        assert_eq!(
            from_abi(MFS_SERVES_TRANSFORM | 0x8 | 0x100, 3),
            Declared {
                known: Serves::TRANSFORM,
                positions: false,
                unknown: 0x108
            }
        );
        assert_eq!(
            from_abi(MFS_SERVES_TRANSFORM | MFS_SERVES_AGGREGATE, 3),
            Declared {
                known: Serves::TRANSFORM | Serves::AGGREGATE,
                positions: false,
                unknown: 0
            }
        );
        assert_eq!(from_abi(0, 3).known, Serves::NONE);
    }

    #[test]
    fn the_positions_bit_means_positions_from_version_3_and_is_unknown_before() {
        let bits = MFS_SERVES_TRANSFORM | MFS_SERVES_POSITIONS;
        let v3 = from_abi(bits, 3);
        assert!(v3.positions);
        assert_eq!(v3.unknown, 0);
        for version in [1, 2] {
            let old = from_abi(bits, version);
            assert!(!old.positions, "version {version}");
            assert_eq!(old.unknown, MFS_SERVES_POSITIONS, "version {version}");
        }
    }

    #[test]
    fn a_set_goes_back_to_the_same_bits() {
        for bits in 0..8 {
            let declared = from_abi(bits, 3);
            assert_eq!(to_abi(declared.known, declared.positions), bits);
        }
    }

    #[test]
    fn a_transforming_plugin_engine_also_serves_aggregates_by_the_host() {
        assert_eq!(
            engine_serves(Serves::TRANSFORM, false),
            Serves::TRANSFORM | Serves::AGGREGATE
        );
        assert_eq!(
            engine_serves(Serves::TRANSFORM, true),
            Serves::TRANSFORM | Serves::AGGREGATE | Serves::POSITIONS
        );
        assert_eq!(engine_serves(Serves::AGGREGATE, false), Serves::NONE);
    }
}
