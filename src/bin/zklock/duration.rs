//! Durations on the command line: `humantime`'s (`500ms`, `2s`, `1m`,
//! `1h30m`, `2min 30s`), a decimal with one unit (`1.5s`, `0.5m`), and a bare
//! number, which is seconds (as flock's `-w`, fractions too: `0.5`).

use std::time::Duration;

/// Parses a duration (clap value parser).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || format!("invalid duration {text:?} (use e.g. 500ms, 2s, 1.5s, 1m, 1h30m)");
    if t.starts_with('-') {
        return Err(format!(
            "negative duration {text:?}: a duration is 0 or more (0 = try once)"
        ));
    }
    if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return decimal(t, "").ok_or_else(bad);
    }
    humantime::parse_duration(t)
        .ok()
        .or_else(|| {
            let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            let (number, unit) = t.split_at(split);
            decimal(number, unit.trim())
        })
        .ok_or_else(bad)
}

/// `number` (digits with at most one inner `.`) of `unit` (`ms`, `s` or
/// none, `m`/`min`, `h`).
fn decimal(number: &str, unit: &str) -> Option<Duration> {
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let seconds_per_unit = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).ok()
}

/// A duration for people: `850ms`, `2.3s`, `4m05s`.
pub(crate) fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m 5s"), Ok(Duration::from_secs(5405)));
        assert_eq!(parse_duration("2min 30s"), Ok(Duration::from_secs(150)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("2 weeks"),
            Ok(Duration::from_secs(14 * 86400))
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "s",
            "-1s",
            "1.s",
            ".5s",
            "2 fortnights",
            "1x",
            "1e9999s",
            "ms",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names_a_negative_duration() {
        for negative in ["-1s", "-1", "-0.5", "-1h30m"] {
            let e = parse_duration(negative).unwrap_err();
            assert!(e.starts_with("negative duration"), "{negative:?}: {e}");
        }
    }

    #[test]
    fn prints_for_people() {
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(2300)), "2.3s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
    }
}
