//! UsageService: the caller's tenant's hourly usage records (time and units, never money).

use std::sync::Arc;

use einsora_core::ids::UsageRecordId;
use einsora_proto::convert::required_time;
use einsora_proto::usage::v1::usage_service_server::UsageService;
use einsora_proto::usage::v1::{self as pb};
use einsora_store::{Store, UsageCursor, UsagePage};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};
use crate::{status, wire};

const DEFAULT_PAGE_SIZE: u32 = 500;
const MAX_PAGE_SIZE: u32 = 5000;

#[derive(Debug, Clone)]
pub struct UsageApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
}

impl UsageApi {
    pub fn new(store: Arc<dyn Store>, auth: Arc<Auth>) -> Self {
        UsageApi { store, auth }
    }
}

#[tonic::async_trait]
impl UsageService for UsageApi {
    async fn list_usage(
        &self,
        request: Request<pb::ListUsageRequest>,
    ) -> Result<Response<pb::ListUsageResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let req = request.into_inner();
        let from = required_time("from", req.from.as_ref()).map_err(status::invalid)?;
        let to = required_time("to", req.to.as_ref()).map_err(status::invalid)?;
        if to <= from {
            return Err(Status::invalid_argument(
                "to is not valid: it must be after from",
            ));
        }
        let limit = match req.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        let page = UsagePage {
            from,
            to,
            owner: caller.scope().owner,
            after: cursor(&req.page_token)?,
            limit: limit + 1,
        };
        let mut found = self
            .store
            .usage_of(caller.tenant, &page)
            .await
            .map_err(status::store)?;
        let more = found.len() > limit as usize;
        found.truncate(limit as usize);
        let next_page_token = match found.last() {
            Some(last) if more => token(UsageCursor::from(last)),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListUsageResponse {
            records: found.iter().map(wire::usage).collect(),
            next_page_token,
        }))
    }
}

/// `<hour start, Unix seconds>_<record ID>`.
fn token(c: UsageCursor) -> String {
    format!("{}_{}", c.hour_start.unix_timestamp(), c.id)
}

fn cursor(token: &str) -> Result<Option<UsageCursor>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    let parsed = token.split_once('_').and_then(|(secs, id)| {
        Some(UsageCursor {
            hour_start: OffsetDateTime::from_unix_timestamp(secs.parse().ok()?).ok()?,
            id: id.parse::<UsageRecordId>().ok()?,
        })
    });
    parsed.map(Some).ok_or_else(|| {
        Status::invalid_argument(
            "page_token is not valid: use the next_page_token of a previous response",
        )
    })
}

#[cfg(test)]
mod tests {
    use einsora_proto::schema::Schema;
    use regex::Regex;

    use super::*;

    #[test]
    fn page_tokens_round_trip_and_bad_ones_are_refused() {
        let c = UsageCursor {
            hour_start: OffsetDateTime::from_unix_timestamp(1_740_830_400).unwrap(),
            id: UsageRecordId::new(),
        };
        assert_eq!(cursor(&token(c)).unwrap(), Some(c));
        assert_eq!(cursor("").unwrap(), None);
        for bad in [
            "x",
            "1_",
            "_",
            "x_0190f5c4-7a4b-7c8d-9e0f-112233445566",
            "1_nope",
        ] {
            let err = cursor(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn the_openapi_pattern_allows_exactly_the_page_tokens_the_api_reads() {
        let rules = Schema::load().unwrap().field_rules();
        let (_, rules) = rules
            .iter()
            .find(|(f, _)| f == "einsora.usage.v1.ListUsageRequest.page_token")
            .unwrap();
        let pattern = Regex::new(rules.string_pattern().unwrap().unwrap()).unwrap();
        let id = UsageRecordId::new();
        // The hours of years 1 to 5138 (11 digits of seconds) are every hour a record has.
        for secs in [-62_135_596_800, 0, 1_740_830_400, 99_999_993_600] {
            let c = UsageCursor {
                hour_start: OffsetDateTime::from_unix_timestamp(secs).unwrap(),
                id,
            };
            assert!(pattern.is_match(&token(c)), "{secs}");
        }
        let upper = id.to_string().to_uppercase();
        let simple = id.as_uuid().simple().to_string();
        let samples = [
            String::new(),
            format!("+5_{id}"),
            format!("-0005_{id}"),
            format!("00000000000001_{upper}"),
            format!("5_{simple}"),
            format!("5_{id}_"),
            format!("5 _{id}"),
            format!("5_ {id}"),
            format!("99999999999_{id}"),
            format!("999999999999_{id}"),
            format!("--5_{id}"),
            format!("5._{id}"),
            "x".to_owned(),
            "1_".to_owned(),
            "_".to_owned(),
        ];
        for s in samples {
            assert_eq!(cursor(&s).is_ok(), pattern.is_match(&s), "{s:?}");
        }
        // A cursor of 12 digits of seconds reads if it is a time (years 5138 to 9999), but no
        // record is that late, so the document leaves it out.
        assert!(cursor(&format!("253402297200_{id}")).is_ok());
    }
}
