//! Token usage: the access proxy's batches of the tokens endpoints' answers used
//! (`ApiInternalService.RecordTokenUsage`), checked and added once each; and how
//! `GET /v1/usage?tokens=hour|range` reads them back.

use einsora_core::ids::{InferenceKeyId, TenantId, UsageRecordId, UserId, WorkloadId};
use einsora_proto::convert::{ConvertError, parse_id, parse_optional_id, required_time, timestamp};
use einsora_proto::internal::v1 as internal_pb;
use einsora_proto::usage::v1 as pb;
use einsora_store::{Store, TokenCount, TokenUsage, TokenUsagePage, UsageCursor};
use time::OffsetDateTime;
use tonic::Status;
use uuid::Uuid;

use crate::{status, usage};

/// The most counts one batch may carry.
pub const MOST_PER_BATCH: usize = 10_000;
/// The most one count may add of each kind: far above what a batch of a few seconds sums
/// (each answer is believed up to 10 million tokens), and far below overflowing a sum.
const MOST_PER_COUNT: u64 = 1 << 40;

/// Adds the proxy's batch; `false` when it had been added already.
pub async fn record(
    store: &dyn Store,
    request: internal_pb::RecordTokenUsageRequest,
) -> Result<bool, Status> {
    let batch: Uuid = request
        .batch_id
        .parse()
        .map_err(|_| Status::invalid_argument("batch_id is not valid: a UUID"))?;
    if request.counts.len() > MOST_PER_BATCH {
        return Err(Status::invalid_argument(format!(
            "counts: at most {MOST_PER_BATCH} in one batch"
        )));
    }
    let counts = request
        .counts
        .iter()
        .enumerate()
        .map(|(i, c)| count(c).map_err(|e| Status::invalid_argument(format!("counts[{i}].{e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    store
        .record_token_usage(batch, &counts)
        .await
        .map_err(status::store)
}

fn count(c: &internal_pb::TokenCount) -> Result<TokenCount, ConvertError> {
    let hour_start = required_time("hour_start", c.hour_start.as_ref())?;
    if hour_start.unix_timestamp().rem_euclid(3600) != 0 || hour_start.nanosecond() != 0 {
        return Err(ConvertError::invalid("hour_start", "on the hour"));
    }
    for (field, n) in [
        ("requests", c.requests),
        ("prompt_tokens", c.prompt_tokens),
        ("completion_tokens", c.completion_tokens),
    ] {
        if n > MOST_PER_COUNT {
            return Err(ConvertError::invalid(
                field,
                format!("at most {MOST_PER_COUNT}"),
            ));
        }
    }
    Ok(TokenCount {
        tenant: parse_id::<TenantId>("tenant_id", &c.tenant_id)?,
        endpoint: parse_id::<WorkloadId>("endpoint_id", &c.endpoint_id)?,
        key: parse_optional_id::<InferenceKeyId>("key_id", &c.key_id)?,
        user: parse_id::<UserId>("user_id", &c.user_id)?,
        hour_start,
        requests: c.requests,
        prompt_tokens: c.prompt_tokens,
        completion_tokens: c.completion_tokens,
    })
}

/// What `tokens` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    Hour,
    Range,
}

impl Tokens {
    /// The request's `tokens`: `None` for usage records.
    pub fn asked(tokens: &str) -> Result<Option<Tokens>, Status> {
        match tokens {
            "" => Ok(None),
            "hour" => Ok(Some(Tokens::Hour)),
            "range" => Ok(Some(Tokens::Range)),
            _ => Err(Status::invalid_argument(
                "tokens is not valid: hour or range (or empty for usage records)",
            )),
        }
    }
}

/// What `ListUsage` asks of token usage.
#[derive(Debug)]
pub struct Asked<'a> {
    pub tokens: Tokens,
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    /// Only this user's (a member's view).
    pub user: Option<UserId>,
    /// The page's size.
    pub limit: u32,
    pub page_token: &'a str,
}

/// A page of token rows, per hour (paged as usage records are, by hour and row ID) or summed
/// over the range (one page: more rows than fit is `INVALID_ARGUMENT`).
pub async fn list(
    store: &dyn Store,
    tenant: TenantId,
    asked: Asked<'_>,
) -> Result<pb::ListUsageResponse, Status> {
    let after = match asked.tokens {
        Tokens::Hour => usage::cursor(asked.page_token)?,
        Tokens::Range => None,
    };
    let page = TokenUsagePage {
        from: asked.from,
        to: asked.to,
        user: asked.user,
        after: after.map(|c| (c.hour_start, *c.id.as_uuid())),
        // One more, to tell whether there are more.
        limit: asked.limit + 1,
    };
    let mut found = match asked.tokens {
        Tokens::Hour => store.token_usage_of(tenant, &page).await,
        Tokens::Range => store.token_usage_summed(tenant, &page).await,
    }
    .map_err(status::store)?;
    let limit = asked.limit as usize;
    let more = found.len() > limit;
    if more && asked.tokens == Tokens::Range {
        return Err(Status::invalid_argument(format!(
            "tokens is not valid for this range: more than {limit} endpoint, key and user rows; \
             ask with tokens=hour, a larger page_size or a shorter range"
        )));
    }
    found.truncate(limit);
    let next_page_token = match found.last() {
        Some(TokenUsage {
            id: Some(id),
            hour_start: Some(hour_start),
            ..
        }) if more => usage::token(UsageCursor {
            hour_start: *hour_start,
            id: UsageRecordId::from_uuid(*id),
        }),
        _ => String::new(),
    };
    Ok(pb::ListUsageResponse {
        records: Vec::new(),
        next_page_token,
        tokens: found.iter().map(wire).collect(),
    })
}

fn wire(r: &TokenUsage) -> pb::TokenUsage {
    pb::TokenUsage {
        tenant_id: r.tenant.to_string(),
        endpoint_id: r.endpoint.to_string(),
        key_id: r.key.map(|k| k.to_string()).unwrap_or_default(),
        user_id: r.user.to_string(),
        hour_start: r.hour_start.map(timestamp),
        requests: r.requests,
        prompt_tokens: r.prompt_tokens,
        completion_tokens: r.completion_tokens,
    }
}

#[cfg(test)]
mod tests {
    use einsora_proto::convert::timestamp;
    use time::macros::datetime;

    use super::*;

    fn good() -> internal_pb::TokenCount {
        internal_pb::TokenCount {
            tenant_id: TenantId::new().to_string(),
            endpoint_id: WorkloadId::new().to_string(),
            key_id: String::new(),
            user_id: UserId::new().to_string(),
            hour_start: Some(timestamp(datetime!(2026-01-01 10:00 UTC))),
            requests: 1,
            prompt_tokens: 12,
            completion_tokens: MOST_PER_COUNT,
        }
    }

    #[test]
    fn a_count_is_of_an_hour_with_ids_and_bounded_numbers() {
        assert_eq!(count(&good()).unwrap().key, None);
        let key = InferenceKeyId::new();
        let keyed = internal_pb::TokenCount {
            key_id: key.to_string(),
            ..good()
        };
        assert_eq!(count(&keyed).unwrap().key, Some(key));
        let bad = [
            (
                "hour_start",
                internal_pb::TokenCount {
                    hour_start: Some(timestamp(datetime!(2026-01-01 10:00:01 UTC))),
                    ..good()
                },
            ),
            (
                "hour_start",
                internal_pb::TokenCount {
                    hour_start: None,
                    ..good()
                },
            ),
            (
                "completion_tokens",
                internal_pb::TokenCount {
                    completion_tokens: MOST_PER_COUNT + 1,
                    ..good()
                },
            ),
            (
                "key_id",
                internal_pb::TokenCount {
                    key_id: "isk_secret".into(),
                    ..good()
                },
            ),
            (
                "tenant_id",
                internal_pb::TokenCount {
                    tenant_id: String::new(),
                    ..good()
                },
            ),
        ];
        for (field, c) in bad {
            let err = count(&c).unwrap_err().to_string();
            assert!(err.starts_with(field), "{err}");
            assert!(!err.contains("isk_secret"), "{err}");
        }
    }

    #[test]
    fn tokens_are_hour_range_or_none() {
        assert_eq!(Tokens::asked("").unwrap(), None);
        assert_eq!(Tokens::asked("hour").unwrap(), Some(Tokens::Hour));
        assert_eq!(Tokens::asked("range").unwrap(), Some(Tokens::Range));
        let err = Tokens::asked("day").unwrap_err();
        assert!(err.message().starts_with("tokens"), "{}", err.message());
    }
}
