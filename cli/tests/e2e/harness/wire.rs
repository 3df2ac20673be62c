//! A browser's requests to the access proxy, byte for byte: any Host, any headers, a
//! WebSocket (RFC 6455 framing, client side), and a streamed response read as it arrives.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The `data:` lines of a server-sent event stream, read until it ends.
pub fn events(addr: &str, request: &str) -> (String, Vec<String>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let data = reader
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("data: ").map(str::to_owned))
        .collect();
    (status, data)
}

pub struct WebSocket {
    stream: TcpStream,
}

impl WebSocket {
    /// Upgrades `path` at `host`; the proxy's answer if it refused.
    pub fn connect(
        addr: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<WebSocket, String> {
        let mut all = vec![
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ];
        all.extend_from_slice(headers);
        let mut text = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
        for (name, value) in all {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        // The head, byte by byte, so no frame is read past it.
        let mut head = Vec::new();
        let mut byte = [0_u8];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        if head.starts_with("HTTP/1.1 101") {
            Ok(WebSocket { stream })
        } else {
            Err(head)
        }
    }

    /// Whether the other side closes the connection within `limit` (whatever it sends first).
    pub fn closes_within(&mut self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        let mut buf = [0_u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }

    /// A masked text frame, as clients send.
    pub fn send(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | u8::try_from(n).unwrap()),
            n if n < 65_536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&u16::try_from(n).unwrap().to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [0x12, 0x34, 0x56, 0x78];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).unwrap();
    }

    /// The next text message (control frames skipped).
    pub fn receive(&mut self) -> String {
        loop {
            let mut head = [0_u8; 2];
            self.stream.read_exact(&mut head).unwrap();
            let len = match head[1] & 0x7f {
                126 => {
                    let mut n = [0_u8; 2];
                    self.stream.read_exact(&mut n).unwrap();
                    u64::from(u16::from_be_bytes(n))
                }
                127 => {
                    let mut n = [0_u8; 8];
                    self.stream.read_exact(&mut n).unwrap();
                    u64::from_be_bytes(n)
                }
                n => u64::from(n),
            };
            let mut payload = vec![0_u8; usize::try_from(len).unwrap()];
            self.stream.read_exact(&mut payload).unwrap();
            if head[0] & 0x0f == 0x1 {
                return String::from_utf8(payload).unwrap();
            }
        }
    }
}
