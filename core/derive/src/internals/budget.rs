//! The storage budget every declaration that counts properties shares: how many chunks
//! a number of application properties takes (`#[wide]` checks a type against it,
//! `#[series]` sizes its periods with it).

use tablekit_core::typed::{FIELDS_PER_CHUNK, FIELDS_PER_ENTITY};

/// The chunks `properties` application properties need: 244 in the first, 250 in each
/// further one.
pub(crate) fn chunks_for(properties: usize) -> usize {
    if properties <= FIELDS_PER_ENTITY {
        1
    } else {
        1 + (properties - FIELDS_PER_ENTITY).div_ceil(FIELDS_PER_CHUNK)
    }
}

#[cfg(test)]
mod tests {
    use super::chunks_for;

    #[test]
    fn the_first_chunk_holds_244_and_each_further_250() {
        assert_eq!(chunks_for(244), 1);
        assert_eq!(chunks_for(245), 2);
        assert_eq!(chunks_for(494), 2);
        assert_eq!(chunks_for(495), 3);
    }
}
