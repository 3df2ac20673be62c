//! Opening notebooks at their own origins: which hosts are answered, one-time tickets, and
//! the session cookie and page the ticket is exchanged for.

use uuid::Uuid;

use crate::fakes::{ALICE, BOB};
use crate::http::{self, get};
use crate::{Harness, cookie, host, open_path};

#[tokio::test]
async fn hosts_other_than_the_notebooks_own_are_refused_without_reaching_it() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = h.open(id, &ALICE).await;
    let with_cookie = [("Cookie", cookie(&session))];
    let with_cookie: Vec<(&str, &str)> =
        with_cookie.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let upper = id.to_string().to_uppercase();
    let simple = id.simple().to_string();
    let other = Uuid::now_v7();
    let refused_hosts = [
        "evil.com".to_owned(),
        "localhost:8090".to_owned(),
        format!("w-{id}.localhost.evil.com"),
        format!("evil.w-{id}.localhost"),
        format!("w-{id}.localhost."),
        format!("W-{id}.localhost:8090"),
        format!("w-{upper}.localhost:8090"),
        format!("w-{{{id}}}.localhost:8090"),
        format!("w-{simple}.localhost:8090"),
        format!("w-urn:uuid:{id}.localhost:8090"),
        format!("w-{id}.localhost:9999"),
        format!("w-{other}.localhost:8090"),
        String::new(),
    ];
    for bad in &refused_hosts {
        let answer = get(h.proxy, bad, "/lab", &with_cookie).await;
        assert!(
            [400, 401, 404].contains(&answer.status),
            "{bad}: {answer:?}"
        );
        answer.error_code();
    }
    let good = host(id);
    let cookie_line = format!("Cookie: {}", cookie(&session));
    let requests = [
        // Two Host headers, one of them another site's.
        format!("GET /lab HTTP/1.1\r\nHost: {good}\r\nHost: evil.com\r\n{cookie_line}"),
        format!("GET /lab HTTP/1.1\r\nHost: evil.com\r\nHost: {good}\r\n{cookie_line}"),
        // No Host at all.
        format!("GET /lab HTTP/1.1\r\n{cookie_line}"),
        // An absolute-form target naming another host, or even this one.
        format!("GET http://evil.com/lab HTTP/1.1\r\nHost: {good}\r\n{cookie_line}"),
        format!("GET http://{good}/lab HTTP/1.1\r\nHost: {good}\r\n{cookie_line}"),
        // Another host named through forwarding headers.
        format!("GET /lab HTTP/1.1\r\nHost: {good}\r\nX-Forwarded-Host: evil.com\r\n{cookie_line}"),
        format!("GET /lab HTTP/1.1\r\nHost: {good}\r\nForwarded: host=evil.com\r\n{cookie_line}"),
    ];
    for request in &requests {
        let answer = http::send(h.proxy, request, "").await;
        assert!([400, 404].contains(&answer.status), "{request}: {answer:?}");
        answer.error_code();
    }
    assert_eq!(
        h.workload.requests(),
        0,
        "no refused request reached the workload"
    );

    // The same request at the notebook's own host does reach it.
    let answer = get(h.proxy, &good, "/lab", &with_cookie).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let bare = get(h.proxy, &format!("w-{id}.localhost"), "/lab", &with_cookie).await;
    assert_eq!(bare.status, 200, "{bare:?}");
    assert_eq!(h.workload.requests(), 2);
}

#[tokio::test]
async fn unknown_and_other_tenants_notebooks_are_refused() {
    let h = Harness::start().await;
    let bobs = h.notebook(&BOB);
    // Alice holds a ticket the api took for Bob's workload: the controller, asked for Alice's
    // tenant, doesn't find it.
    let ticket = h.ticket(bobs, &ALICE);
    let answer = get(h.proxy, &host(bobs), &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 404, "{answer:?}");
    assert_eq!(answer.error_code(), "not_found");
    assert!(answer.header("set-cookie").is_none());
    // A workload nobody runs.
    let unknown = Uuid::now_v7();
    let ticket = h.ticket(unknown, &ALICE);
    let answer = get(h.proxy, &host(unknown), &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 404, "{answer:?}");
    // An endpoint is no notebook.
    let endpoint = h.endpoint(&ALICE);
    let ticket = h.ticket(endpoint, &ALICE);
    let answer = get(h.proxy, &host(endpoint), &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 404, "{answer:?}");
    assert_eq!(h.workload.requests(), 0);
}

#[tokio::test]
async fn a_ticket_opens_exactly_one_session_and_only_at_its_workload() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let ticket = h.ticket(id, &ALICE);
    let attempts = (0..100).map(|_| {
        let (proxy, host, path) = (h.proxy, host(id), open_path(&ticket));
        tokio::spawn(async move { get(proxy, &host, &path, &[]).await })
    });
    let mut statuses = Vec::new();
    for attempt in attempts.collect::<Vec<_>>() {
        let answer = attempt.await.unwrap();
        if answer.status != 200 {
            assert_eq!(answer.error_code(), "unauthenticated", "{answer:?}");
            assert!(answer.header("set-cookie").is_none());
        }
        statuses.push(answer.status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 99);

    // A ticket presented at another workload's host is refused (and the api keeps it).
    let other = h.notebook(&ALICE);
    let ticket = h.ticket(id, &ALICE);
    let answer = get(h.proxy, &host(other), &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    // No ticket, an empty one, or a POST: refused too.
    for path in [
        "/_einsora/open",
        "/_einsora/open?ticket=",
        "/_einsora/open?x=1",
    ] {
        assert_eq!(
            get(h.proxy, &host(id), path, &[]).await.status,
            401,
            "{path}"
        );
    }
    let post = http::send(
        h.proxy,
        &http::head("POST", &open_path(&ticket), &host(id), &[]),
        "",
    )
    .await;
    assert_eq!(post.status, 405, "{post:?}");
    let answer = get(h.proxy, &host(id), &open_path(&ticket), &[]).await;
    assert_eq!(
        answer.status, 200,
        "the ticket still works at its own host: {answer:?}"
    );
    assert_eq!(
        h.workload.requests(),
        0,
        "opening never reaches the workload"
    );
}

#[tokio::test]
async fn the_open_page_sets_a_host_only_strict_cookie_and_moves_on_by_itself() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let ticket = h.ticket(id, &ALICE);
    let answer = get(h.proxy, &host(id), &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let cookies = answer.all("set-cookie");
    assert_eq!(cookies.len(), 1);
    let attributes: Vec<&str> = cookies[0].split("; ").collect();
    let value = attributes[0].strip_prefix("einsora_access=").unwrap();
    assert_eq!(value.len(), 64);
    assert!(value.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(attributes[1..], ["Path=/", "HttpOnly", "SameSite=Strict"]);
    assert!(!cookies[0].to_ascii_lowercase().contains("domain"));

    assert_eq!(answer.header("cache-control"), Some("no-store"));
    assert_eq!(answer.header("referrer-policy"), Some("no-referrer"));
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(answer.header("x-request-id").is_some());
    let csp = answer.header("content-security-policy").unwrap();
    assert!(
        csp.starts_with("default-src 'none'; script-src 'nonce-"),
        "{csp}"
    );
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    assert!(nonce.len() >= 32, "{csp}");
    let script = format!("<script nonce=\"{nonce}\">location.replace(\"/\")</script>");
    assert!(answer.body.contains(&script), "{}", answer.body);
    assert!(!answer.body.contains(&ticket));
    assert_eq!(answer.body.matches("<script").count(), 1);

    // Behind https, the cookie is Secure.
    let h = Harness::with_url("https://localhost").await;
    let id = h.notebook(&ALICE);
    let ticket = h.ticket(id, &ALICE);
    let at = format!("w-{id}.localhost");
    let answer = get(h.proxy, &at, &open_path(&ticket), &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        answer
            .header("set-cookie")
            .unwrap()
            .ends_with("; SameSite=Strict; Secure")
    );
    // And the notebook's origin is the https one, without the default port.
    let session = answer
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let https_origin = format!("https://w-{id}.localhost");
    let ok = get(
        h.proxy,
        &at,
        "/",
        &[("Cookie", &session), ("Origin", &https_origin)],
    )
    .await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let http_origin = format!("http://w-{id}.localhost");
    let refused = get(
        h.proxy,
        &at,
        "/",
        &[("Cookie", &session), ("Origin", &http_origin)],
    )
    .await;
    assert_eq!(refused.status, 403, "{refused:?}");
}
