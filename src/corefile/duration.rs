//! Go-style durations, as CoreDNS plugins take them (`5s`, `500ms`, `1m30s`, `1.5h`).

use std::time::Duration;

/// Parses a Go-style duration: one or more `NUMBER UNIT` pairs (`5s`, `500ms`, `1m30s`, `1.5h`,
/// `.5s`), units `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`; a bare `0` is zero. An optional
/// `+` may lead. Negative durations, missing units and values past `u64::MAX` nanoseconds (about
/// 584 years) give `None`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                a.split_at(n)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        total = total.checked_add(component(int, frac, scale)?)?;
        rest = after;
    }
    let nanos = u64::try_from(total).ok()?;
    Some(Duration::from_nanos(nanos))
}

/// `int.frac` in units of `scale` nanoseconds, truncated to whole nanoseconds.
fn component(int: &str, frac: &str, scale: u128) -> Option<u128> {
    let mut value: u128 = 0;
    for b in int.bytes() {
        value = value.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
        if value > u128::from(u64::MAX) {
            return None;
        }
    }
    let mut nanos = value.checked_mul(scale)?;
    // Digits past the nanosecond are dropped (at most 19 matter, as scale < 10^19).
    let mut place = scale;
    for b in frac.bytes().take(20) {
        place /= 10;
        if place == 0 {
            break;
        }
        nanos = nanos.checked_add(u128::from(b - b'0') * place)?;
    }
    Some(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("5s", Duration::from_secs(5)),
            ("500ms", Duration::from_millis(500)),
            ("1m", Duration::from_secs(60)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m3s4ms", Duration::from_millis(3_723_004)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("5.s", Duration::from_secs(5)),
            ("1.5h", Duration::from_secs(5400)),
            ("100us", Duration::from_micros(100)),
            ("100µs", Duration::from_micros(100)),
            ("100μs", Duration::from_micros(100)),
            ("7ns", Duration::from_nanos(7)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("0.0000000019s", Duration::from_nanos(1)),
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("+2s", Duration::from_secs(2)),
            ("10s10s", Duration::from_secs(20)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_duration(s), Some(want), "{s}");
        }
    }

    #[test]
    fn bad_durations() {
        for s in [
            "",
            "5",
            "s",
            ".s",
            "5x",
            "5 s",
            " 5s",
            "-1s",
            "1e3s",
            "5sec",
            "1..5s",
            "++5s",
            "1s5",
            "99999999999999999999h",
            "6000000h",
        ] {
            assert_eq!(parse_duration(s), None, "{s:?}");
        }
        assert_eq!(
            parse_duration(&format!("{}ns", u64::MAX)),
            Some(Duration::from_nanos(u64::MAX))
        );
        assert_eq!(parse_duration(&format!("{}1ns", u64::MAX)), None);
        assert!(parse_duration(&format!("1.{}s", "9".repeat(1000))).is_some());
    }
}
