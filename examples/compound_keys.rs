//! Compound keys: padded numbers, a separator below every character the parts use, and
//! keys split back into their parts.
//!
//! `cargo run --example compound_keys`

#![allow(clippy::print_stdout)]

use tablekit::core::keys::{self, CompoundKey};
use tablekit::typed::KeyTemplate;

fn main() -> tablekit::Result<()> {
    let template = KeyTemplate::parse("{device},{seller},{card:06}")?;
    let key = template.render_args(&[&"d1", &"s9", &42u32])?;
    println!("key: {key}");
    println!("parts: {:?}", template.split(&key)?);
    let ids = template.range(&[&"d1", &"s9"], &100u32, &199u32)?;
    println!("cards 100..=199 of d1/s9: {} ..= {}", ids.start, ids.end);
    // `,` sorts below digits and letters; `:` does not, and is refused for such parts.
    println!(
        "',' keeps order: {}",
        CompoundKey::new(',').check_part("a100").is_ok()
    );
    println!("padded 54: {}", keys::pad(54, 6)?);
    Ok(())
}
