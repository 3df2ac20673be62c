//! Times are stored as Unix milliseconds in both engines (one set of queries; exact ordering).

use time::OffsetDateTime;

use crate::StoreError;

pub(crate) fn now_ms() -> i64 {
    to_ms(OffsetDateTime::now_utc())
}

pub(crate) fn to_ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

pub(crate) fn from_ms(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|_| StoreError::corrupt("a timestamp", ms))
}

pub(crate) fn duration_ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
