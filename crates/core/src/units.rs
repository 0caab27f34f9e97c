//! Human-written sizes (`2.5GiB`) and durations (`1h30m`), RFC 3339 dates (through jiff), and
//! their display.

/// Parses a size such as `512MiB`, `2.5GiB` or `30GB` into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim() {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    let bytes = n * mult;
    (bytes.is_finite() && bytes < 1e18).then_some(bytes.round() as u64)
}

/// Parses a duration such as `45m`, `1h30m`, `90s` or `2h` into seconds.
pub fn parse_duration(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        let mult = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
    }
    if !num.is_empty() {
        return None;
    }
    Some(total)
}

pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

pub fn format_hours(hours: f64) -> String {
    let minutes = (hours * 60.0).round() as u64;
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m:02}m"),
    }
}

pub fn format_duration(secs: u64) -> String {
    match (secs / 3600, (secs % 3600) / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A date that is not an RFC 3339 UTC timestamp rocforge can use: malformed, or outside the
/// range of `u64` seconds since the epoch (before 1970). Dates come from indexes and registries
/// that rocforge does not control, so a bad one is an error to report, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not an RFC 3339 date: {why}")]
pub struct DateError {
    pub value: String,
    pub why: String,
}

/// `secs` since the epoch as RFC 3339 UTC (`YYYY-MM-DDTHH:MM:SSZ`), whole seconds.
///
/// Seconds past jiff's last timestamp (9999-12-30T22:00:00Z) are written as that timestamp:
/// such a number can only come from a damaged results bundle or cache entry, and a date that is
/// obviously wrong reads better in a report than a failed report.
pub fn rfc3339(secs: u64) -> String {
    let ts = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    // Whole seconds and a `Z`: the format indexes, receipts and image configs have always had.
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Seconds since the epoch of an RFC 3339 date: what [`rfc3339`] writes, and also `+00:00` or
/// any other offset for `Z`, and fractional seconds (dropped). Dates before 1970 are refused.
pub fn parse_rfc3339(s: &str) -> Result<u64, DateError> {
    let err = |why: String| DateError {
        value: s.to_string(),
        why,
    };
    let secs = match s.trim().parse::<jiff::Timestamp>() {
        Ok(ts) => ts.as_second(),
        // jiff's timestamps end at 9999-12-30T22:00:00Z; a "never expires" date after that
        // (`9999-12-31T23:59:59Z`) is still a valid RFC 3339 date, counted from its parts.
        Err(e) => beyond_timestamps(s.trim()).ok_or_else(|| err(e.to_string()))?,
    };
    u64::try_from(secs).map_err(|_| err("it is before 1970".into()))
}

/// Seconds since the epoch of an RFC 3339 date with a time and an offset, from its civil parts
/// (so dates past [`jiff::Timestamp::MAX`] work too).
fn beyond_timestamps(s: &str) -> Option<i64> {
    let pieces = jiff::fmt::temporal::Pieces::parse(s).ok()?;
    let time = pieces.time()?;
    let offset = pieces.to_numeric_offset()?;
    let epoch = jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0);
    let since = pieces.date().to_datetime(time).duration_since(epoch);
    Some(since.as_secs() - i64::from(offset.seconds()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for t in [0u64, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Ok(t), "{}", rfc3339(t));
        }
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
        // What servers write besides `Z`: an explicit zero offset, fractions, a lower-case `t`.
        let t = 1_764_428_820;
        assert_eq!(rfc3339(t), "2025-11-29T15:07:00Z");
        for s in [
            "2025-11-29T15:07:00Z",
            "2025-11-29T15:07:00+00:00",
            "2025-11-29T15:07:00.123456Z",
            "2025-11-29t15:07:00z",
            "2025-11-29T16:07:00+01:00",
        ] {
            assert_eq!(parse_rfc3339(s), Ok(t), "{s}");
        }
        for bad in [
            "",
            "yesterday",
            "2025-11-29",
            "1969-12-31T23:59:59Z",
            "2025-02-30T00:00:00Z",
        ] {
            let e = parse_rfc3339(bad).unwrap_err();
            assert_eq!(e.value, bad);
        }
        // "Never expires" dates past jiff's last timestamp parse too.
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), Ok(253_402_300_799));
        assert_eq!(
            parse_rfc3339("9999-12-31T23:59:59+01:00"),
            Ok(253_402_297_199)
        );
        assert!(parse_rfc3339("9999-12-31").is_err());
        assert!(parse_rfc3339("9999-12-32T00:00:00Z").is_err());
        // A damaged number never panics: it is written as the last date jiff knows.
        assert_eq!(rfc3339(u64::MAX), "9999-12-30T22:00:00Z");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2.5GiB"), Some(2_684_354_560));
        assert_eq!(parse_size("512MiB"), Some(536_870_912));
        assert_eq!(parse_size("30GB"), Some(30_000_000_000));
        assert_eq!(parse_size("12 gigs"), None);
        assert_eq!(parse_size("GiB"), None);
        assert_eq!(format_size(2_684_354_560), "2.5 GiB");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("45m"), Some(2700));
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("90"), None);
        assert_eq!(parse_duration("45 minutes"), None);
        assert_eq!(format_duration(5400), "1h30m");
        assert_eq!(format_hours(1.5), "1h30m");
    }
}
