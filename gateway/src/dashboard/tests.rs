//! The table against `web/`, the pages against the Content-Security-Policy, and what is served
//! for which request.

use std::path::{Path, PathBuf};

use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE};

use super::*;

/// Files of web/ the browser never asks for: its README, and the payload types tsc reads.
const NOT_SERVED: &[&str] = &["README.md", "api-types.d.ts"];

fn web() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web")
}

/// Every file under `dir`, as a path relative to `root` with `/` separators.
fn files(root: &Path, dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(root, &path, found);
        } else {
            let relative = path.strip_prefix(root).unwrap();
            let parts: Vec<_> = relative.iter().map(|p| p.to_str().unwrap()).collect();
            found.push(parts.join("/"));
        }
    }
}

#[test]
fn the_table_is_every_file_of_web() {
    let mut on_disk = Vec::new();
    files(&web(), &web(), &mut on_disk);
    on_disk.retain(|f| !NOT_SERVED.contains(&f.as_str()));
    on_disk.sort();
    let mut table: Vec<String> = ASSETS.iter().map(|a| a.file.to_owned()).collect();
    table.sort();
    assert_eq!(
        table, on_disk,
        "gateway/src/dashboard.rs ASSETS and web/ differ: add or remove the file there"
    );
    for asset in ASSETS {
        let built_in = asset.body;
        let current = std::fs::read(web().join(asset.file)).unwrap();
        assert_eq!(built_in, current.as_slice(), "{}", asset.file);
        assert!(
            content_type(asset.file).is_some(),
            "{} has no content type",
            asset.file
        );
    }
}

/// The opening tags of an HTML text, lowercased: `<name attributes…>`.
fn tags(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut tags = Vec::new();
    let mut rest = lower.as_str();
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        if rest.starts_with("!--") {
            rest = rest.find("-->").map_or("", |end| &rest[end + 3..]);
            continue;
        }
        let end = rest.find('>').expect("every tag is closed");
        tags.push(rest[..end].to_owned());
        rest = &rest[end + 1..];
    }
    tags
}

/// A tag's attributes, `(name, value)`, with quoted and unquoted values.
fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut chars = tag.chars().peekable();
    while chars.next_if(|c| !c.is_whitespace()).is_some() {}
    let mut found = Vec::new();
    loop {
        while chars.next_if(|c| c.is_whitespace() || *c == '/').is_some() {}
        let mut name = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=' && *c != '/') {
            name.push(c);
        }
        if name.is_empty() {
            return found;
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'=').is_some() {
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
            match chars.next_if(|c| *c == '"' || *c == '\'') {
                Some(quote) => value.extend(chars.by_ref().take_while(|c| *c != quote)),
                None => {
                    while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                        value.push(c);
                    }
                }
            }
        }
        found.push((name, value));
    }
}

#[test]
fn attributes_are_parsed_with_their_quotes() {
    let tag = r#"meta name="viewport" content='width=device-width, only=1' defer src=/a.js"#;
    let expected = [
        ("name", "viewport"),
        ("content", "width=device-width, only=1"),
        ("defer", ""),
        ("src", "/a.js"),
    ];
    let found = attributes(tag);
    let found: Vec<(&str, &str)> = found
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn the_pages_have_no_inline_script_or_style() {
    let pages: Vec<&Asset> = ASSETS
        .iter()
        .filter(|a| a.file.ends_with(".html"))
        .collect();
    assert!(!pages.is_empty());
    for page in pages {
        let html = std::str::from_utf8(page.body).unwrap();
        let tags = tags(html);
        let scripts: Vec<&String> = tags.iter().filter(|t| t.starts_with("script")).collect();
        assert!(!scripts.is_empty(), "{}: no script at all?", page.file);
        for script in scripts {
            let src = attributes(script)
                .into_iter()
                .find(|(name, _)| name == "src");
            let src = src.map(|(_, value)| value).unwrap_or_default();
            assert!(!src.is_empty(), "{}: inline <{script}>", page.file);
            assert!(
                src.starts_with('/') && !src.starts_with("//"),
                "{}: a script from elsewhere: {src}",
                page.file
            );
            let file = src.trim_start_matches('/');
            assert!(ASSETS.iter().any(|a| a.file == file), "{src} is not served");
        }
        for tag in &tags {
            let name = tag.split_whitespace().next().unwrap_or_default();
            assert_ne!(name, "style", "{}: a <style> element", page.file);
            for (attribute, _) in attributes(tag) {
                assert_ne!(
                    attribute, "style",
                    "{}: a style attribute in <{tag}>",
                    page.file
                );
                assert!(
                    !attribute.starts_with("on"),
                    "{}: an inline handler in <{tag}>",
                    page.file
                );
            }
            assert!(!tag.contains("javascript:"), "{}: <{tag}>", page.file);
        }
    }
}

#[test]
fn the_scripts_build_pages_without_markup_strings_or_eval() {
    for asset in ASSETS.iter().filter(|a| a.file.ends_with(".js")) {
        let code = std::str::from_utf8(asset.body).unwrap();
        for refused in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute('style'",
            "window.confirm",
        ] {
            assert!(!code.contains(refused), "{} uses {refused}", asset.file);
        }
        // Only the dashboard's own modules: no URL outside this origin.
        for line in code
            .lines()
            .filter(|l| l.trim_start().starts_with("import "))
        {
            assert!(
                line.contains("from './") || line.contains("from '../"),
                "{line}"
            );
        }
    }
    let css = ASSETS.iter().find(|a| a.file == "style.css").unwrap();
    let css = std::str::from_utf8(css.body).unwrap();
    assert!(
        !css.contains("@import") && !css.contains("url("),
        "no external assets"
    );
}

fn html_accept() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
    );
    headers
}

#[test]
fn pages_get_index_html_and_files_get_themselves() {
    for path in [
        "/",
        "/signin",
        "/workloads",
        "/workloads/abc",
        "/nothing/here",
    ] {
        let response = serve(&Method::GET, path, &html_accept()).expect(path);
        assert_eq!(response.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(
            response.headers()[CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY_VALUE
        );
        assert_eq!(response.headers()[X_FRAME_OPTIONS], "DENY");
        assert_eq!(response.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
    for (path, expected) in [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/pages/launch.js", "text/javascript; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/favicon.svg", "image/svg+xml"),
        ("/index.html", "text/html; charset=utf-8"),
    ] {
        for headers in [HeaderMap::new(), html_accept()] {
            let response = serve(&Method::GET, path, &headers).expect(path);
            assert_eq!(response.headers()[CONTENT_TYPE], expected, "{path}");
            assert_eq!(response.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
    }
    assert!(serve(&Method::HEAD, "/workloads", &html_accept()).is_some());
}

#[test]
fn the_api_and_other_requests_are_not_the_dashboards() {
    for path in [
        "/v1",
        "/v1/",
        "/v1/nothing",
        "/v1/workloads/abc/x",
        "/v1/app.js",
    ] {
        assert!(
            serve(&Method::GET, path, &html_accept()).is_none(),
            "{path}"
        );
    }
    // Not a page load: fetch, the CLI and curl name no text/html.
    for accept in ["", "application/json", "*/*", "text/plain"] {
        let mut headers = HeaderMap::new();
        if !accept.is_empty() {
            headers.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        }
        assert!(
            serve(&Method::GET, "/workloads", &headers).is_none(),
            "{accept}"
        );
    }
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
        assert!(serve(&method, "/workloads", &html_accept()).is_none());
        assert!(serve(&method, "/app.js", &html_accept()).is_none());
    }
    // Only the table's files: no path reaches the disk.
    for path in [
        "/../Cargo.toml",
        "/README.md",
        "/pages/../app.js",
        "/APP.JS",
    ] {
        assert!(
            serve(&Method::GET, path, &HeaderMap::new()).is_none(),
            "{path}"
        );
    }
}

#[test]
fn html_is_recognised_in_any_accept_form() {
    for accept in [
        "text/html",
        "TEXT/HTML;q=0.9",
        "application/json, text/html ;q=0.1",
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        assert!(accepts_html(&headers), "{accept}");
    }
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("text/htmlx"));
    assert!(!accepts_html(&headers));
}

#[test]
fn index_preloads_every_module_so_none_waits_for_another() {
    let index = ASSETS.iter().find(|a| a.file == INDEX).unwrap();
    let tags = tags(std::str::from_utf8(index.body).unwrap());
    let mut loaded: Vec<String> = tags
        .iter()
        .filter(|t| t.starts_with("script") || t.starts_with("link"))
        .filter_map(|t| {
            let attributes = attributes(t);
            let is =
                |name: &str, value: &str| attributes.iter().any(|(n, v)| n == name && v == value);
            let wanted = t.starts_with("script") || is("rel", "modulepreload");
            let url = attributes.iter().find(|(n, _)| n == "src" || n == "href");
            url.filter(|_| wanted)
                .map(|(_, v)| v.trim_start_matches('/').to_owned())
        })
        .collect();
    loaded.sort();
    let mut modules: Vec<String> = ASSETS
        .iter()
        .filter(|a| a.file.ends_with(".js"))
        .map(|a| a.file.to_owned())
        .collect();
    modules.sort();
    assert_eq!(loaded, modules, "web/index.html: add a modulepreload link");
}
