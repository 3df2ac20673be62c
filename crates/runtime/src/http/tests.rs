//! The limits of a plain HTTP port, over real TCP on loopback with scaled-down timers.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{HttpLimits, serve};
use crate::shutdown::Shutdown;

const HEADER_READ: Duration = Duration::from_millis(300);
/// Generous: a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(10);

async fn server(max_connections: usize) -> (String, Shutdown) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shutdown = Shutdown::new();
    let limits = HttpLimits {
        max_connections,
        header_read: HEADER_READ,
    };
    let hello = tower::service_fn(|_request| async {
        Ok::<_, Infallible>(hyper::Response::new("hello".to_owned()))
    });
    tokio::spawn(serve(
        listener,
        limits,
        None,
        shutdown.clone(),
        move |_peer| hello,
    ));
    (addr, shutdown)
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/// The next answer's text on `tcp` (one small response), or `None` if it closed first.
async fn answer(tcp: &mut TcpStream) -> Option<String> {
    let mut buf = vec![0_u8; 1024];
    let n = tokio::time::timeout(PATIENCE, tcp.read(&mut buf))
        .await
        .expect("an answer or a close in time")
        .ok()?;
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// How long until the server closes `tcp`, reading (and dropping) whatever it sends.
async fn closed_after(tcp: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0_u8; 1024];
    loop {
        let read = tokio::time::timeout(PATIENCE, tcp.read(&mut buf)).await;
        match read.expect("closed in time") {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn requests_are_served_and_kept_alive() {
    let (addr, _shutdown) = server(4).await;
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    for _ in 0..2 {
        tcp.write_all(GET).await.unwrap();
        let got = answer(&mut tcp).await.expect("an answer");
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with("hello"),
            "{got}"
        );
    }
}

#[tokio::test]
async fn a_connection_that_sends_no_head_in_time_is_closed() {
    let (addr, _shutdown) = server(4).await;
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let waited = closed_after(&mut silent).await;
    assert!(waited >= HEADER_READ / 2 && waited < PATIENCE, "{waited:?}");

    // A byte at a time, never finishing the head: closed too.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " {
        if slow.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if started.elapsed() > HEADER_READ * 4 {
            break;
        }
    }
    closed_after(&mut slow).await;
    assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());

    // Idle after an answer: closed once the next head doesn't come.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(GET).await.unwrap();
    answer(&mut idle).await.expect("an answer");
    let waited = closed_after(&mut idle).await;
    assert!(waited >= HEADER_READ / 2, "{waited:?}");
}

#[tokio::test]
async fn past_the_cap_a_connection_waits_until_one_closes() {
    let (addr, _shutdown) = server(2).await;
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(GET).await.unwrap();
        answer(&mut tcp).await.expect("within the cap");
        held.push(tcp);
    }
    let mut third = TcpStream::connect(&addr).await.unwrap();
    third.write_all(GET).await.unwrap();
    let mut buf = [0_u8; 64];
    let early = tokio::time::timeout(HEADER_READ / 3, third.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the third connection was served past the cap"
    );
    drop(held.pop());
    let got = answer(&mut third).await.expect("served once a slot freed");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
}
