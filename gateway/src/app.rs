//! The axum application: one route per `google.api.http` binding, `GET /v1/openapi.json`, the
//! dashboard (`web/`) outside `/v1`, and the error envelope for unknown paths (404) and wrong
//! methods (405, with `Allow`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, get};
use axum::{Extension, Router, middleware};
use einsora_proto::schema::Schema;
use einsora_runtime::shutdown::Shutdown;
use prost_reflect::DescriptorPool;
use tonic::transport::Channel;

use crate::edge::{self, RequestId};
use crate::errors::ApiError;
use crate::hosts::Hosts;
use crate::json::Words;
use crate::proxies::TrustedProxies;
use crate::routes::{self, Route};
use crate::{dashboard, handler, openapi};

pub(crate) const OPENAPI_PATH: &str = "/v1/openapi.json";

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Gateway {
    pub(crate) words: Words,
    pub(crate) channel: Channel,
    pub(crate) proxies: TrustedProxies,
    pub(crate) insecure_http: bool,
    pub(crate) hosts: Hosts,
    pub(crate) shutdown: Shutdown,
}

/// The settings the edge and the handlers act on.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) proxies: TrustedProxies,
    pub(crate) insecure_http: bool,
    pub(crate) hosts: Hosts,
    /// The gateway's stop: a streamed answer ends with it.
    pub(crate) shutdown: Shutdown,
}

/// Why the gateway can't be built from the descriptors.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the descriptor set does not decode: {0}")]
    Descriptors(String),
    #[error(transparent)]
    Route(#[from] routes::RouteError),
    #[error("the OpenAPI document: {0}")]
    OpenApi(String),
    #[error("the HTTP method {0} is not routable")]
    Method(String),
}

/// The routes and the document, derived from `einsora_proto::FILE_DESCRIPTOR_SET`.
pub(crate) struct Api {
    pub(crate) routes: Vec<Route>,
    pub(crate) words: Words,
    pub(crate) openapi: serde_json::Value,
}

impl Api {
    pub(crate) fn load() -> Result<Api, BuildError> {
        let descriptors = |e: &dyn std::fmt::Display| BuildError::Descriptors(e.to_string());
        let schema = Schema::load().map_err(|e| descriptors(&e))?;
        let pool = DescriptorPool::decode(einsora_proto::FILE_DESCRIPTOR_SET)
            .map_err(|e| descriptors(&e))?;
        let routes = routes::load(&pool, &schema)?;
        for route in &routes {
            method_filter(route)?;
        }
        let words = Words::from_schema(&schema);
        let openapi = openapi::document(&routes, &words, &schema).map_err(BuildError::OpenApi)?;
        Ok(Api {
            routes,
            words,
            openapi,
        })
    }
}

fn method_filter(route: &Route) -> Result<MethodFilter, BuildError> {
    MethodFilter::try_from(route.method.clone())
        .map_err(|_| BuildError::Method(route.method.to_string()))
}

/// The application, with the edge layer on every route and fallback.
pub(crate) fn router(api: Api, channel: Channel, options: Options) -> Result<Router, BuildError> {
    let gateway = Arc::new(Gateway {
        words: api.words,
        channel,
        proxies: options.proxies,
        insecure_http: options.insecure_http,
        hosts: options.hosts,
        shutdown: options.shutdown,
    });
    let document = Bytes::from(api.openapi.to_string());
    let mut paths: BTreeMap<String, MethodRouter> = BTreeMap::new();
    paths.insert(
        OPENAPI_PATH.to_owned(),
        get(move || async move { json(document.clone()) }),
    );
    for route in api.routes {
        let filter = method_filter(&route)?;
        let path = route.path.clone();
        let (gateway, route) = (Arc::clone(&gateway), Arc::new(route));
        let handler = move |request| handler::handle(gateway, route, request);
        let methods = paths.remove(&path).unwrap_or_default();
        paths.insert(path, methods.on(filter, handler));
    }
    let app = paths
        .into_iter()
        .fold(Router::new(), |app, (path, methods)| {
            app.route(&path, methods.fallback(method_not_allowed))
        });
    Ok(app
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(gateway, edge::edge)))
}

fn json(body: Bytes) -> Response {
    (
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

/// The dashboard's files and pages, else the API's 404.
async fn not_found(
    Extension(id): Extension<RequestId>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    dashboard::serve(&method, uri.path(), &headers)
        .unwrap_or_else(|| ApiError::not_found().into_response(&id))
}

async fn method_not_allowed(Extension(id): Extension<RequestId>) -> Response {
    ApiError::method_not_allowed().into_response(&id)
}

#[cfg(test)]
mod tests;
