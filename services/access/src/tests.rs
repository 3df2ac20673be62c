use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

fn config(addr: SocketAddr) -> Config {
    Config {
        addr,
        public_url: "http://localhost:8090".into(),
    }
}

#[tokio::test]
async fn every_request_is_a_404_envelope_until_the_proxy_arrives() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let server = tokio::spawn(serve(listener, config(addr), shutdown.clone()));
    for request in ["GET / HTTP/1.1", "POST /e/x/v1/chat HTTP/1.1"] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!("{request}\r\nHost: w-1.localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        assert!(answer.contains("x-request-id: "), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "not_found");
    }
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("access stops on shutdown")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_port_in_use_names_the_setting() {
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap();
    let err = run(config(addr), Shutdown::new()).await.unwrap_err();
    let expected = format!("EINSORA_ACCESS_ADDR: can't listen on {addr}");
    assert!(err.to_string().starts_with(&expected), "{err}");
}
