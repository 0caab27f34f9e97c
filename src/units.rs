//! Human-written sizes (`2.5GiB`) and durations (`1h30m`), and their display.

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

#[cfg(test)]
mod tests {
    use super::*;

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
