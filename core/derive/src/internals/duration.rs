//! Durations in declarations (`ttl = "30d"`, `every = "1h"`): whole numbers each followed
//! by a unit.

/// Reads a duration: whole numbers each followed by a unit, `d`, `h`, `m` or `s`
/// (`"30d"`, `"1d12h"`, `"90s"`), in seconds.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in text.chars() {
        if let Some(digit) = c.to_digit(10) {
            let n = number.unwrap_or(0);
            number = Some(
                n.checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(digit)))
                    .ok_or("it is too long")?,
            );
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            other => return Err(format!("`{other}` is not a unit (d, h, m, s)")),
        };
        let n = number.take().ok_or("each unit needs a number before it")?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or("it is too long")?;
    }
    if number.is_some() {
        return Err("a number needs a unit (d, h, m, s)".to_owned());
    }
    Ok(total)
}
