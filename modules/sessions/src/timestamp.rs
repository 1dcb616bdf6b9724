//! RFC 3339 timestamps as both agents write them (`2025-10-29T00:59:38.317Z`,
//! or with an offset), turned into milliseconds since the epoch.
//!
//! Only what durations and ordering need: no time zone database, no calendar
//! beyond the proleptic Gregorian arithmetic, and anything else is `None`
//! (a record with an unreadable timestamp still counts; it just does not move
//! the session's start or end).

/// Milliseconds since 1970-01-01T00:00:00Z, or `None` when `text` is not
/// an RFC 3339 date-time.
pub fn parse_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0;
    if rest.first() == Some(&b'.') {
        let fraction_len = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if fraction_len == 0 {
            return None;
        }
        let fraction = &rest[1..=fraction_len];
        for (i, scale) in [100, 10, 1].into_iter().enumerate() {
            if let Some(d) = fraction.get(i) {
                millis += i64::from(d - b'0') * scale;
            }
        }
        rest = &rest[1 + fraction_len..];
    }
    let offset_minutes = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let minutes = digits(&[*h1, *h2])? * 60 + digits(&[*m1, *m2])?;
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

fn digits(bytes: &[u8]) -> Option<i64> {
    bytes.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_agents_timestamps_parse_to_the_same_instant() {
        assert_eq!(parse_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_millis("2025-10-29T00:59:38.317Z"),
            Some(1_761_699_578_317)
        );
        assert_eq!(
            parse_millis("2025-10-29T02:59:38.317+02:00"),
            parse_millis("2025-10-29T00:59:38.317Z")
        );
        assert_eq!(
            parse_millis("2024-02-29T12:00:00.5Z"),
            Some(1_709_208_000_500)
        );
    }

    #[test]
    fn anything_else_is_none_not_a_guess() {
        for bad in [
            "",
            "yesterday",
            "2025-13-01T00:00:00Z",
            "2025-10-29T00:59:38",
            "2025-10-29T00:59:38.Z",
            "2025-10-29T00:59:38+0200",
            "２０２５-10-29T00:59:38Z",
        ] {
            assert_eq!(parse_millis(bad), None, "{bad}");
        }
    }
}
