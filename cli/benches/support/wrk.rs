//! wrk, closed loop, one thread: what the benches that compare HTTP paths read from it. A run
//! with socket errors or non-2xx answers fails rather than print a figure.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

#[derive(Debug, Clone)]
pub struct Wrk {
    pub requests: f64,
    pub rate: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The server's CPU per request, where the caller measured it.
    pub cpu_us_per_request: f64,
}

impl Wrk {
    /// `connections` kept-alive connections for `seconds` at `url`, with `headers`
    /// (`Name: value`).
    pub fn run(
        wrk: &Path,
        headers: &[String],
        url: &str,
        connections: u32,
        seconds: u64,
    ) -> anyhow::Result<Wrk> {
        let mut cmd = Command::new(wrk);
        cmd.args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
            .arg("--latency");
        for h in headers {
            cmd.args(["-H", h]);
        }
        let out = cmd.arg(url).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(out.status.success(), "wrk failed: {text}");
        Wrk::parse(&text).with_context(|| format!("wrk said: {text}"))
    }

    fn parse(text: &str) -> Option<Wrk> {
        let (mut requests, mut rate, mut p50, mut p99) = (None, None, None, None);
        for line in text.lines().map(str::trim) {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["50%", v] => p50 = duration_us(v),
                ["99%", v] => p99 = duration_us(v),
                ["Requests/sec:", v] => rate = v.parse().ok(),
                [n, "requests", "in", ..] => requests = n.parse().ok(),
                ["Non-2xx", ..] | ["Socket", "errors:", ..] => {
                    eprintln!("wrk: {line}");
                    return None;
                }
                _ => {}
            }
        }
        Some(Wrk {
            requests: requests?,
            rate: rate?,
            p50_us: p50?,
            p99_us: p99?,
            cpu_us_per_request: 0.0,
        })
    }
}

fn duration_us(text: &str) -> Option<f64> {
    let unit = text.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let number: f64 = text[..text.len() - unit.len()].parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        _ => return None,
    };
    Some(number * scale)
}

/// `wrk` on the PATH (`apt-get install wrk`).
pub fn find() -> anyhow::Result<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("wrk"))
        .find(|p| p.is_file())
        .context("wrk is not on the PATH: apt-get install wrk")
}
