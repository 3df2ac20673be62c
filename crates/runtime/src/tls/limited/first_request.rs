//! The header-read timeout for HTTP/2: a connection must have sent the complete headers of its
//! first request within a deadline of its handshake, or it is closed (a reader error). HTTP/2
//! has no such timeout of its own, and a peer that only answers pings would otherwise hold its
//! slot forever. It watches the frame headers going by (9 bytes each, after the 24-byte
//! preface) for a HEADERS or CONTINUATION frame with END_HEADERS, then stops looking.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

const PREFACE: usize = 24;
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

#[derive(Debug)]
pub(super) struct FirstRequest {
    /// `None` once a request's headers were read.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Bytes to pass over before the next frame header (the preface, then each payload).
    skip: usize,
    header: [u8; FRAME_HEADER],
    have: usize,
}

impl FirstRequest {
    pub(super) fn new(deadline: Instant) -> FirstRequest {
        FirstRequest {
            deadline: Some(Box::pin(tokio::time::sleep_until(deadline))),
            skip: PREFACE,
            header: [0; FRAME_HEADER],
            have: 0,
        }
    }

    /// `Err` once the deadline passed without a request; arms the timer's wake-up otherwise.
    pub(super) fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(sleep) = &mut self.deadline else {
            return Ok(());
        };
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request's headers within the header-read timeout",
            )),
            Poll::Pending => Ok(()),
        }
    }

    /// Looks at bytes just read.
    pub(super) fn saw(&mut self, mut bytes: &[u8]) {
        while self.deadline.is_some() && !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (FRAME_HEADER - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == FRAME_HEADER {
                let h = self.header;
                let length = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let (kind, flags) = (h[3], h[4]);
                if matches!(kind, HEADERS | CONTINUATION) && flags & END_HEADERS != 0 {
                    self.deadline = None;
                }
                self.skip = length;
                self.have = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    fn watching() -> FirstRequest {
        FirstRequest::new(Instant::now() + Duration::from_secs(3600))
    }

    #[tokio::test]
    async fn complete_headers_stop_the_clock_whatever_the_chunks() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, &[0; 12])); // SETTINGS
        bytes.extend(frame(0x6, 0, &[0x1; 8])); // PING, its payload like a HEADERS header
        bytes.extend(frame(HEADERS, 0, &[0x4; 20])); // without END_HEADERS
        let mut open = watching();
        open.saw(&bytes);
        assert!(open.deadline.is_some(), "no complete headers yet");
        bytes.extend(frame(CONTINUATION, END_HEADERS, &[0; 5]));
        for chunk in [1, 2, 7, 100] {
            let mut w = watching();
            for piece in bytes.chunks(chunk) {
                w.saw(piece);
            }
            assert!(w.deadline.is_none(), "in chunks of {chunk}");
        }
        let mut at_once = watching();
        let mut headers = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        headers.extend(frame(HEADERS, END_HEADERS | 0x1, &[0; 3]));
        at_once.saw(&headers);
        assert!(at_once.deadline.is_none());
    }

    #[tokio::test]
    async fn without_a_request_the_deadline_fails_the_reader() {
        let mut w = FirstRequest::new(Instant::now() + Duration::from_millis(20));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(w.check(&mut cx).is_ok());
        tokio::time::sleep(Duration::from_millis(60)).await;
        let err = w.check(&mut cx).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
