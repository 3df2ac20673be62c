//! The dashboard: the files of `web/`, built into the binary, served at their own paths
//! (`/app.js`, `/pages/launch.js`), and `index.html` for every other page a browser asks for
//! outside `/v1`, so the dashboard's client-side routes survive a refresh. Every answer carries
//! a strict Content-Security-Policy (no inline script or style, no eval), refuses framing and
//! sniffing. `/v1` is the API's alone: an unknown `/v1` path stays a JSON 404.

use axum::http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};

pub(crate) const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
     base-uri 'none'; form-action 'self'";

/// One file of `web/`.
#[derive(Debug)]
pub(crate) struct Asset {
    /// Its path under `web/`, which is also its URL path without the leading `/`.
    pub(crate) file: &'static str,
    pub(crate) body: &'static [u8],
}

macro_rules! assets {
    ($($file:literal),* $(,)?) => {
        &[$(Asset { file: $file, body: include_bytes!(concat!("../../web/", $file)) }),*]
    };
}

/// Every file the dashboard is made of. A test keeps this list and `web/` the same.
pub(crate) const ASSETS: &[Asset] = assets![
    "index.html",
    "style.css",
    "favicon.svg",
    "app.js",
    "api.js",
    "dom.js",
    "health.js",
    "format.js",
    "pages/signin.js",
    "pages/workloads.js",
    "pages/workload.js",
    "pages/launch.js",
    "pages/machines.js",
    "pages/tokens.js",
    "pages/keys.js",
    "pages/usage.js",
    "pages/activity.js",
    "pages/logs.js",
    "pages/users.js",
    "pages/link.js",
    "pages/quotas.js",
    "pages/notfound.js",
];

const INDEX: &str = "index.html";

/// The content type a file is served with, by its extension.
pub(crate) fn content_type(file: &str) -> Option<&'static str> {
    let extension = file.rsplit_once('.').map(|(_, e)| e)?;
    Some(match extension {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        _ => return None,
    })
}

/// The dashboard's answer to a request the API's routes didn't take, if it has one.
pub(crate) fn serve(method: &Method, path: &str, headers: &HeaderMap) -> Option<Response> {
    if !matches!(*method, Method::GET | Method::HEAD) || is_api(path) {
        return None;
    }
    let file = path.strip_prefix('/').unwrap_or(path);
    if let Some(asset) = ASSETS.iter().find(|a| a.file == file) {
        return Some(respond(asset));
    }
    if !accepts_html(headers) {
        return None;
    }
    ASSETS.iter().find(|a| a.file == INDEX).map(respond)
}

fn is_api(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

/// A browser's page load (navigation) names text/html; `fetch` and the CLI don't.
fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let essence = range.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("text/html")
        })
}

fn respond(asset: &Asset) -> Response {
    let content_type = content_type(asset.file).unwrap_or("application/octet-stream");
    let headers = [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
        ),
        (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (REFERRER_POLICY, HeaderValue::from_static("same-origin")),
        // Small files on a near network: always revalidate, so a new binary's files are used.
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, asset.body).into_response()
}

#[cfg(test)]
mod tests;
