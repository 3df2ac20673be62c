use super::*;

use crate::app::Api;
use crate::routes::Route;

fn route(rpc: &str) -> Route {
    let api = Api::load().unwrap();
    api.routes.into_iter().find(|r| r.rpc == rpc).unwrap()
}

fn with_keys(keys: &[&[u8]]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for key in keys {
        headers.append(HEADER, HeaderValue::from_bytes(key).unwrap());
    }
    headers
}

#[test]
fn keys_are_one_header_of_1_to_255_printable_characters() {
    let create = route("CreateWorkload");
    assert_eq!(key(&create, &HeaderMap::new()).unwrap(), None);
    let long = "k".repeat(255);
    for good in [&b"a"[..], b"order 42/retry~", long.as_bytes()] {
        let found = key(&create, &with_keys(&[good])).unwrap();
        assert_eq!(found.as_deref().map(str::as_bytes), Some(good));
    }
    let too_long = "k".repeat(256);
    for bad in [
        &[][..],
        too_long.as_bytes(),
        b"tab\there",
        "\u{e9}".as_bytes(),
    ] {
        let error = key(&create, &with_keys(&[bad])).unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.message.as_str()),
            (400, BAD_KEY)
        );
    }
    let error = key(&create, &with_keys(&[b"a", b"b"])).unwrap_err();
    assert_eq!(error.status.as_u16(), 400, "two keys");
}

#[test]
fn routes_without_a_signed_in_caller_and_other_methods_ignore_the_key() {
    for rpc in [
        "Login",
        "AcceptInvite",
        "ResetPassword",
        "ListWorkloads",
        "DeleteWorkload",
    ] {
        let ignored = key(&route(rpc), &with_keys(&[b"\t"])).unwrap();
        assert_eq!(ignored, None, "{rpc}");
    }
}

#[test]
fn the_hash_is_of_method_path_and_canonical_body() {
    let post = Method::POST;
    let uri: Uri = "/v1/workloads".parse().unwrap();
    let body = br#"{"name":"a","kind":"notebook","labels":{"y":1,"x":2}}"#;
    let a = request_hash(&post, &uri, body);
    let b = request_hash(
        &post,
        &uri,
        b"{ \"kind\": \"notebook\",\n \"labels\": {\"x\": 2, \"y\": 1}, \"name\": \"a\" }",
    );
    assert_eq!(a, b, "the same JSON written another way");
    assert_eq!(a.len(), 32);
    assert_ne!(
        a,
        request_hash(&post, &uri, br#"{"name":"b","kind":"notebook"}"#)
    );
    let other: Uri = "/v1/tokens".parse().unwrap();
    assert_ne!(a, request_hash(&post, &other, body));
    assert_ne!(a, request_hash(&Method::PUT, &uri, body));
    let query: Uri = "/v1/workloads?x=1".parse().unwrap();
    assert_ne!(a, request_hash(&post, &query, body));
    assert_eq!(
        request_hash(&post, &uri, b""),
        request_hash(&post, &uri, b"{}")
    );
}

#[tokio::test]
async fn a_kept_answer_is_sent_again_and_a_withheld_one_is_a_conflict() {
    let response = replay(202, Some(r#"{"id":"w"}"#.into())).unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(response.headers()[REPLAYED], "true");
    assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_eq!(&body[..], br#"{"id":"w"}"#);
    let withheld = replay(200, None).unwrap_err();
    assert_eq!((withheld.status.as_u16(), withheld.code), (409, "conflict"));
    assert!(
        replay(503, Some("{}".into())).is_err(),
        "only successes are kept"
    );
}
