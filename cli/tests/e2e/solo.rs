//! The api and the gateway as real processes on a fresh data directory (the Solo shape until
//! `einsora up` supervises them), with every log line they write captured for the secrets test,
//! and a raw HTTP/1.1 client so tests control every byte they send.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Einsora, free_addr, terminate};

/// Where a stack keeps its data.
#[derive(Debug, Clone, Copy)]
pub enum Engine {
    Sqlite,
    /// A fresh database on the test process's throwaway Postgres server.
    Postgres,
}

pub struct Solo {
    pub e: Einsora,
    pub http: String,
    /// EINSORA_DATABASE_URL of this stack.
    pub database: String,
    children: Vec<Child>,
    logs: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
}

/// A raw HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Solo {
    /// Starts the api (with `env`, e.g. EINSORA_AUTH_MODE=dev) and the gateway, and waits until
    /// the gateway answers.
    pub fn start(env: &[(&str, &str)]) -> Solo {
        Solo::start_on(Engine::Sqlite, env)
    }

    pub fn start_on(engine: Engine, env: &[(&str, &str)]) -> Solo {
        let e = Einsora::new();
        let database = match engine {
            Engine::Sqlite => format!("sqlite:{}", e.db().display()),
            Engine::Postgres => einsora_testkit::TempPostgres::shared()
                .fresh_database()
                .unwrap(),
        };
        let db = [("EINSORA_DATABASE_URL", database.as_str())];
        assert!(e.run(&["migrate"], &db).status.success());
        assert!(e.run(&["pki", "init"], &[]).status.success());
        let api = free_addr();
        let http = free_addr();
        let mut common: Vec<(&str, &str)> = vec![
            ("EINSORA_API_ADDR", &api),
            ("EINSORA_HTTP_ADDR", &http),
            ("EINSORA_DATABASE_URL", &database),
        ];
        common.extend_from_slice(env);
        let logs = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let mut children = Vec::new();
        for role in ["api", "gateway"] {
            let mut child = e.spawn(&[role], &common);
            if let Some(err) = child.stderr.take() {
                collect(err, &logs);
            }
            if let Some(out) = child.stdout.take() {
                collect(out, &stdout);
            }
            children.push(child);
        }
        let solo = Solo {
            e,
            http,
            database,
            children,
            logs,
            stdout,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while solo
            .try_request("GET", "/v1/openapi.json", &[], None)
            .map(|a| a.status)
            != Some(200)
        {
            assert!(
                Instant::now() < deadline,
                "the gateway never answered:\n{}",
                solo.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        solo
    }

    /// What the processes printed on standard output (dev mode's accounts).
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Everything the processes have logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Answer {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|| panic!("{method} {path}: no answer\n{}", self.logs()))
    }

    fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Option<Answer> {
        let mut stream = TcpStream::connect(&self.http).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.http
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body.unwrap_or(""));
        stream.write_all(request.as_bytes()).ok()?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).ok()?;
        parse(&raw)
    }
}

impl Drop for Solo {
    fn drop(&mut self) {
        for child in self.children.drain(..).rev() {
            terminate(child);
        }
    }
}

fn collect(from: impl Read + Send + 'static, into: &Arc<Mutex<String>>) {
    let into = Arc::clone(into);
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
}

fn parse(raw: &[u8]) -> Option<Answer> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
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
