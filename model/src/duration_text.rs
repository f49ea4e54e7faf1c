//! Durations as people write them in a config file, a record or a request: `90s`, `15m`, `1h`,
//! `2d`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| "expected a number followed by s, m, h or d".to_string())?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| "expected a number followed by s, m, h or d".to_string())?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => return Err(format!("unknown unit {unit:?}: expected s, m, h or d")),
    };
    let secs = secs
        .filter(|s| *s <= 10 * 365 * 86_400)
        .ok_or_else(|| "longer than ten years".to_string())?;
    Ok(Duration::from_secs(secs))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}
