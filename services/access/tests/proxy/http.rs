//! A raw HTTP/1.1 client, so tests can send what no well-behaved client would (two Host
//! headers, an absolute-form target) and read streams as they arrive.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(20);

pub use einsora_testkit::http::Answer;

/// The headers the workload received, from its echo.
pub fn echoed(answer: &Answer, name: &str) -> Vec<String> {
    answer.json()["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pair| pair[0] == name)
        .map(|pair| pair[1].as_str().unwrap().to_owned())
        .collect()
}

/// Sends `head` (lines without the final blank line; `Connection: close` is added) and `body`,
/// and reads the whole answer.
pub async fn send(addr: SocketAddr, head: &str, body: &str) -> Answer {
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let text = format!("{head}\r\n{length}Connection: close\r\n\r\n{body}");
    einsora_testkit::http::exchange_async(addr, &text).await
}

/// A GET at `host` with extra header lines.
pub async fn get(addr: SocketAddr, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(addr, &head("GET", path, host, headers), "").await
}

pub fn head(method: &str, path: &str, host: &str, headers: &[(&str, &str)]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}");
    for (name, value) in headers {
        head.push_str(&format!("\r\n{name}: {value}"));
    }
    head
}

/// What a stream read so far, as an answer.
pub fn parse(raw: &str) -> Answer {
    einsora_testkit::http::parse(raw.as_bytes())
        .unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"))
}

/// An open connection whose answer is read as it arrives.
#[derive(Debug)]
pub struct Stream {
    pub tcp: TcpStream,
    pub seen: String,
}

impl Stream {
    pub async fn open(addr: SocketAddr, head: &str) -> Stream {
        Stream::open_with(addr, head, "").await
    }

    /// [`Stream::open`] with a request body.
    pub async fn open_with(addr: SocketAddr, head: &str, body: &str) -> Stream {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(format!("{head}\r\n\r\n{body}").as_bytes())
            .await
            .unwrap();
        Stream {
            tcp,
            seen: String::new(),
        }
    }

    /// Reads until `text` has been seen (counting from `from`), panicking after `WAIT`.
    pub async fn wait_for(&mut self, text: &str, from: usize) {
        let read = async {
            let mut buf = [0u8; 4096];
            while !self.seen[from.min(self.seen.len())..].contains(text) {
                let n = self.tcp.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before {text:?}: {:?}", self.seen);
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        };
        tokio::time::timeout(WAIT, read)
            .await
            .unwrap_or_else(|_| panic!("no {text:?} in time: {:?}", self.seen));
    }

    /// Whether the answer ends (the terminating chunk or the connection closing) within
    /// `limit`.
    pub async fn ends_within(&mut self, limit: Duration) -> bool {
        let read = async {
            let mut buf = [0u8; 4096];
            loop {
                match self.tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if self.seen.ends_with("\r\n0\r\n\r\n") {
                            return;
                        }
                    }
                }
            }
        };
        tokio::time::timeout(limit, read).await.is_ok()
    }
}
