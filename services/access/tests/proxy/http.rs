//! A raw HTTP/1.1 client, so tests can send what no well-behaved client would (two Host
//! headers, an absolute-form target) and read streams as they arrive.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.all(name).into_iter().next()
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// The error envelope's code, checking the envelope and the request ID on the way.
    pub fn error_code(&self) -> String {
        let body = self.json();
        let id = self
            .header("x-request-id")
            .expect("every answer has a request ID");
        assert_eq!(body["error"]["request_id"], id, "{self:?}");
        assert!(body["error"]["message"].is_string(), "{self:?}");
        body["error"]["code"].as_str().unwrap().to_owned()
    }

    /// The headers the workload received, from its echo.
    pub fn echoed(&self, name: &str) -> Vec<String> {
        self.json()["headers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|pair| pair[0] == name)
            .map(|pair| pair[1].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Sends `head` (lines without the final blank line; `Connection: close` is added) and `body`,
/// and reads the whole answer.
pub async fn send(addr: SocketAddr, head: &str, body: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let text = format!("{head}\r\n{length}Connection: close\r\n\r\n{body}");
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("the proxy answers in time")
        .unwrap();
    parse(&String::from_utf8_lossy(&raw))
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

pub fn parse(raw: &str) -> Answer {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let status = status
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
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
