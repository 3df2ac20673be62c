//! A raw HTTP/1.1 client, byte for byte, so tests can send what no well-behaved client would
//! (two Host headers, an absolute-form target, a forged header) and read what comes back as it
//! came: one request per connection, `Connection: close`, the whole answer read.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Long enough for any answer; it only runs out on a hang.
const WAIT: Duration = Duration::from_secs(60);

/// An answer as it came: header names lowercased (they are case-insensitive), a chunked body
/// put together.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.all(name).into_iter().next()
    }

    /// Every value of header `name`, in order.
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

    /// The error envelope's code, checking the envelope and its request ID on the way.
    pub fn error_code(&self) -> String {
        let body = self.json();
        let id = self
            .header("x-request-id")
            .expect("every answer has a request ID");
        assert_eq!(body["error"]["request_id"], id, "{self:?}");
        assert!(body["error"]["message"].is_string(), "{self:?}");
        body["error"]["code"].as_str().unwrap().to_owned()
    }

    /// The code of an inference route's error, in OpenAI's shape (`{"error": {"message",
    /// "type", "code", "param"}}`), checking the shape on the way: the request ID is a header,
    /// never in the body.
    pub fn openai_error_code(&self) -> String {
        let body = self.json();
        assert!(
            self.header("x-request-id").is_some(),
            "every answer has a request ID"
        );
        let error = &body["error"];
        assert!(error.get("request_id").is_none(), "{self:?}");
        assert!(error["message"].is_string(), "{self:?}");
        assert!(error["type"].is_string(), "{self:?}");
        error["code"].as_str().unwrap().to_owned()
    }
}

/// A request's text: `method path` at `host` with `headers`, `Connection: close`, and `body`
/// (with its length when there is one, or the method says there is).
pub fn request(
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

/// Sends `request` (its whole text) on a connection of its own and reads the whole answer.
#[track_caller]
pub fn exchange(addr: &str, request: &str) -> Answer {
    try_exchange(addr, request).unwrap_or_else(|| panic!("no HTTP answer to:\n{request}"))
}

/// [`exchange`], `None` when nothing answered or what came isn't HTTP.
pub fn try_exchange(addr: &str, request: &str) -> Option<Answer> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(WAIT)).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    parse(&raw)
}

/// [`exchange`] on the runtime; panics when nothing answers within a minute.
pub async fn exchange_async(addr: std::net::SocketAddr, request: &str) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("an answer in time")
        .unwrap();
    parse(&raw).unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"))
}

/// A streamed answer: its head, and its body's lines as they arrive (a thread reads them; the
/// channel closes when the answer ends or the connection breaks).
#[derive(Debug)]
pub struct Streamed {
    pub head: Answer,
    pub lines: std::sync::mpsc::Receiver<String>,
}

/// Sends `request` and hands back the answer's head at once and its body line by line as it
/// comes (chunked or not), for answers that go on (NDJSON, a followed log).
#[track_caller]
pub fn stream(addr: &str, request: &str) -> Streamed {
    use std::io::BufRead;
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).unwrap();
        if read == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let head = parse(format!("{head}\r\n").as_bytes()).expect("an HTTP answer's head");
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"));
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut pending = Vec::new();
        let send = |bytes: &[u8], pending: &mut Vec<u8>| -> bool {
            pending.extend_from_slice(bytes);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                if tx.send(line).is_err() {
                    return false;
                }
            }
            true
        };
        loop {
            let data = if chunked {
                let mut size = String::new();
                if reader.read_line(&mut size).unwrap_or(0) == 0 {
                    return;
                }
                let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                    return;
                };
                let mut data = vec![0; size + 2];
                if size == 0 || reader.read_exact(&mut data).is_err() {
                    return;
                }
                data.truncate(size);
                data
            } else {
                let buffered = match reader.fill_buf() {
                    Ok([]) | Err(_) => return,
                    Ok(bytes) => bytes.to_vec(),
                };
                reader.consume(buffered.len());
                buffered
            };
            if !send(&data, &mut pending) {
                return;
            }
        }
    });
    Streamed { head, lines }
}

/// An answer's bytes as an [`Answer`]; `None` if they aren't one.
pub fn parse(raw: &[u8]) -> Option<Answer> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Some(Answer {
        status,
        headers,
        body,
    })
}

/// A chunked body's chunks, joined; it stops at the last chunk or at what doesn't read.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_with_its_headers_and_a_chunked_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: a=1\r\n\
                    set-cookie: b=2\r\nTransfer-Encoding: chunked\r\n\r\n\
                    5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let answer = parse(raw).unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-type"), Some("text/plain"));
        assert_eq!(answer.all("Set-Cookie"), ["a=1", "b=2"]);
        assert_eq!(answer.body, "hello world");
        assert!(parse(b"garbage").is_none());
    }

    #[test]
    fn a_request_says_its_length_and_closes() {
        let text = request("POST", "/v1/x", "h:1", &[("X-A", "1")], "");
        assert_eq!(
            text,
            "POST /v1/x HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\nX-A: 1\r\n\
             Content-Length: 0\r\n\r\n"
        );
    }
}
