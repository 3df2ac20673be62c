//! UsageService: the caller's tenant's hourly usage records (time and units, never money), and
//! its token usage (`token_usage.rs`).

use std::sync::Arc;

use einsora_core::ids::UsageRecordId;
use einsora_proto::convert::required_time;
use einsora_proto::usage::v1::usage_service_server::UsageService;
use einsora_proto::usage::v1::{self as pb};
use einsora_store::{
    Store, UsageCursor, UsageGrouping, UsagePage, UsageReportQuery, UsageReportRow,
};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};
use crate::{status, token_usage, wire};

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
        if let Some(tokens) = token_usage::Tokens::asked(&req.tokens)? {
            let asked = token_usage::Asked {
                tokens,
                from,
                to,
                user: caller.scope().owner,
                limit,
                page_token: &req.page_token,
            };
            let answer = token_usage::list(&*self.store, caller.tenant, asked).await?;
            return Ok(Response::new(answer));
        }
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
            tokens: Vec::new(),
        }))
    }

    async fn get_usage_report(
        &self,
        request: Request<pb::GetUsageReportRequest>,
    ) -> Result<Response<pb::GetUsageReportResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let req = request.into_inner();
        let from = required_time("from", req.from.as_ref()).map_err(status::invalid)?;
        let to = required_time("to", req.to.as_ref()).map_err(status::invalid)?;
        if to <= from {
            return Err(Status::invalid_argument(
                "to is not valid: it must be after from",
            ));
        }
        let by = grouping(&req.by)?;
        let query = UsageReportQuery {
            from,
            to,
            by,
            owner: caller.scope().owner,
        };
        let mut rows = self
            .store
            .usage_report(caller.tenant, &query)
            .await
            .map_err(status::store)?;
        rows.sort_by(|a, b| order(a).cmp(&order(b)));
        Ok(Response::new(pb::GetUsageReportResponse {
            by: req.by,
            from: req.from,
            to: req.to,
            rows: rows.iter().map(|r| report_row(by, r)).collect(),
        }))
    }
}

/// The request's `by`.
fn grouping(by: &str) -> Result<UsageGrouping, Status> {
    match by {
        "user" => Ok(UsageGrouping::User),
        "team" => Ok(UsageGrouping::Team),
        "class" => Ok(UsageGrouping::Class),
        "" => Err(Status::invalid_argument(
            "by is missing: user, team or class",
        )),
        _ => Err(Status::invalid_argument(
            "by is not valid: user, team or class",
        )),
    }
}

/// Rows with a label first, by label; then by ID and class.
fn order(r: &UsageReportRow) -> (bool, Option<&str>, Option<uuid::Uuid>, &str) {
    (
        r.label.is_none(),
        r.label.as_deref(),
        r.group_id,
        &r.placed_class,
    )
}

fn report_row(by: UsageGrouping, r: &UsageReportRow) -> pb::UsageReportRow {
    let group_id = match by {
        UsageGrouping::Class => r.placed_class.clone(),
        UsageGrouping::User | UsageGrouping::Team => {
            r.group_id.map(|id| id.to_string()).unwrap_or_default()
        }
    };
    pb::UsageReportRow {
        group_id,
        label: r.label.clone().unwrap_or_default(),
        placed_class: r.placed_class.clone(),
        workloads: r.workloads,
        seconds: r.seconds,
        unit_seconds: r.unit_seconds,
        unit_hours: unit_hours(r.unit_seconds),
    }
}

/// `unit_seconds` / 3600 with four decimal places, rounded half up.
fn unit_hours(unit_seconds: u64) -> String {
    let ten_thousandths = (u128::from(unit_seconds) * 10_000 + 1_800) / 3_600;
    format!(
        "{}.{:04}",
        ten_thousandths / 10_000,
        ten_thousandths % 10_000
    )
}

/// `<hour start, Unix seconds>_<record ID>`.
pub(crate) fn token(c: UsageCursor) -> String {
    format!("{}_{}", c.hour_start.unix_timestamp(), c.id)
}

pub(crate) fn cursor(token: &str) -> Result<Option<UsageCursor>, Status> {
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
    fn unit_hours_are_a_decimal_of_four_places() {
        for (secs, hours) in [
            (0, "0.0000"),
            (1, "0.0003"),
            (3600, "1.0000"),
            (5400, "1.5000"),
            (2400, "0.6667"),
            (u64::MAX, "5124095576030431.0042"),
        ] {
            assert_eq!(unit_hours(secs), hours, "{secs}");
        }
    }

    #[test]
    fn by_is_user_team_or_class() {
        assert_eq!(grouping("user").unwrap(), UsageGrouping::User);
        assert_eq!(grouping("team").unwrap(), UsageGrouping::Team);
        assert_eq!(grouping("class").unwrap(), UsageGrouping::Class);
        for bad in ["", "User", "teams", "money"] {
            let err = grouping(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(err.message().starts_with("by"), "{}", err.message());
        }
    }

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
