//! `google.protobuf.Timestamp` ↔ `time::OffsetDateTime` (UTC).

use prost_types::Timestamp;
use time::OffsetDateTime;

use super::{ConvertError, Problem};

/// A time to send.
pub fn timestamp(t: OffsetDateTime) -> Timestamp {
    Timestamp {
        seconds: t.unix_timestamp(),
        // Always in 0..1_000_000_000, so it fits.
        nanos: t.nanosecond() as i32,
    }
}

/// A required time field; out-of-range seconds or nanos are refused.
pub fn required_time(field: &str, ts: Option<&Timestamp>) -> Result<OffsetDateTime, ConvertError> {
    optional_time(field, ts)?.ok_or_else(|| ConvertError::new(field, Problem::Missing))
}

/// An optional time field; unset reads as none.
pub fn optional_time(
    field: &str,
    ts: Option<&Timestamp>,
) -> Result<Option<OffsetDateTime>, ConvertError> {
    let Some(ts) = ts else { return Ok(None) };
    let bad = || {
        ConvertError::invalid(
            field,
            "use an RFC 3339 time between years 1 and 9999 (nanoseconds 0 to 999999999)",
        )
    };
    if !(0..1_000_000_000).contains(&ts.nanos) {
        return Err(bad());
    }
    let nanos = i128::from(ts.seconds) * 1_000_000_000 + i128::from(ts.nanos);
    let t = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| bad())?;
    if !(1..=9999).contains(&t.year()) {
        return Err(bad());
    }
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn times_round_trip() {
        let t = datetime!(2025-03-01 12:30:45.123456789 UTC);
        let ts = timestamp(t);
        assert_eq!(required_time("from", Some(&ts)), Ok(t));
        assert_eq!(optional_time("to", None), Ok(None));
    }

    #[test]
    fn bad_times_name_the_field() {
        assert_eq!(
            required_time("from", None),
            Err(ConvertError::new("from", Problem::Missing))
        );
        let bad_nanos = Timestamp {
            seconds: 0,
            nanos: -1,
        };
        assert_eq!(
            required_time("to", Some(&bad_nanos)).unwrap_err().field,
            "to"
        );
        let too_late = Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        };
        assert!(required_time("to", Some(&too_late)).is_err());
        let before_year_one = Timestamp {
            seconds: -62_135_596_801,
            nanos: 0,
        };
        assert!(required_time("from", Some(&before_year_one)).is_err());
    }
}
