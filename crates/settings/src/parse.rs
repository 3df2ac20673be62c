//! The value grammars behind the typed getters.

use std::time::Duration;

/// One or more `<integer><unit>` parts, units `ms`, `s`, `m`, `h`: `500ms`, `1m30s`.
pub fn duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.checked_mul(60)?),
            "h" => Duration::from_secs(number.checked_mul(3600)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// `<scheme>:<rest>` with a scheme from `schemes` and no whitespace; `http`/`https` URLs need
/// `//host[:port]`. Each store parses its own URL fully; this catches what is plainly wrong.
pub(super) fn url(text: &str, schemes: &[&str]) -> Result<(), String> {
    let expected = || format!("is not a URL starting with {}:", schemes.join(": or "));
    let (scheme, rest) = text.split_once(':').ok_or_else(expected)?;
    if !schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return Err(expected());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("is not a URL: it contains whitespace".to_owned());
    }
    if rest.is_empty() {
        return Err("is not a URL: nothing follows the scheme".to_owned());
    }
    if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") {
        http_authority(rest)?;
    }
    Ok(())
}

fn http_authority(rest: &str) -> Result<(), String> {
    let after = rest
        .strip_prefix("//")
        .ok_or_else(|| "is not a URL: expected // and a host after the scheme".to_owned())?;
    let authority = after.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.rfind(':') {
        // A colon inside brackets belongs to an IPv6 address, not to a port.
        Some(i) if !host_port[i..].contains(']') => (&host_port[..i], Some(&host_port[i + 1..])),
        _ => (host_port, None),
    };
    if host.is_empty() {
        return Err("is not a URL: it has no host".to_owned());
    }
    match port.map(str::parse::<u16>) {
        Some(Err(_)) => Err("is not a URL: its port is not a number up to 65535".to_owned()),
        _ => Ok(()),
    }
}

/// A number of bytes with an optional binary unit: `1048576`, `512KiB`, `20MiB`, `2GiB`,
/// `1TiB` (units in any case).
pub fn size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let unit = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err("is not a size like 2GiB or 512MiB".to_owned()),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| "is not a size like 2GiB or 512MiB".to_owned())?;
    number
        .checked_mul(unit)
        .ok_or_else(|| "is too large".to_owned())
}
