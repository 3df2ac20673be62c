//! `einsora ssh <id>`: the system's `ssh` into a running VM, with `einsora ssh-proxy <id>` as
//! its ProxyCommand (the form for people's own clients and `~/.ssh/config`). The proxy asks the
//! API for a one-time ticket, upgrades a connection to the access proxy's `/_einsora/ssh` at the
//! VM's host with it, and then copies stdin and stdout to and from the VM's SSH server: no
//! port is opened anywhere, and the access proxy checks each session as it checks notebooks'.

use std::path::Path;

use anyhow::{Context, bail};
use hyper::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::commands::segment;
use super::http::Api;

/// The guest's user (the image's default user, whom the VM's keys log in as).
const GUEST_USER: &str = "einsora";
/// The most a refusal's head and body may be before it is cut off.
const ANSWER_LIMIT: usize = 64 * 1024;

/// Runs `ssh` into VM `id`, with `args` after the destination (a command, say); `known_hosts`
/// keeps each VM's host key under its own alias.
pub fn ssh(
    id: &str,
    identity: Option<&Path>,
    known_hosts: &Path,
    args: &[String],
) -> anyhow::Result<()> {
    let id = segment(id)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let proxy = format!("{} ssh-proxy {id}", shell_quote(&exe.display().to_string()));
    if let Some(dir) = known_hosts.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let mut command = std::process::Command::new("ssh");
    command
        .arg("-o")
        .arg(format!("ProxyCommand={proxy}"))
        .arg("-o")
        .arg(format!("HostKeyAlias=einsora-{id}"))
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        // The first session records the VM's key; a changed one is refused from then on.
        .args(["-o", "StrictHostKeyChecking=accept-new"])
        .args(["-l", GUEST_USER]);
    if let Some(identity) = identity {
        command.arg("-i").arg(identity);
    }
    let status = command
        .arg(format!("vm-{id}"))
        .args(args)
        .status()
        .context("running ssh (is OpenSSH's client installed?)")?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => bail!("ssh ended by a signal ({status})"),
    }
}

/// One session's bytes between stdin/stdout and VM `id`'s SSH server.
pub async fn proxy(api: &Api, id: &str) -> anyhow::Result<()> {
    let path = format!("/v1/workloads/{}/access", segment(id)?);
    let grant = api.call(Method::POST, &path, Some(json!({}))).await?;
    let (Some(url), Some(ticket)) = (
        grant["ssh"]["url"].as_str(),
        grant["ssh"]["ticket"].as_str(),
    ) else {
        bail!("workload {id} isn't a VM: only VMs are reached over SSH");
    };
    let target = Target::parse(url)?;
    let mut stream = TcpStream::connect(target.connect_to())
        .await
        .with_context(|| format!("connecting to the access proxy at {}", target.authority))?;
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: upgrade\r\nUpgrade: einsora-ssh\r\n\
         Authorization: Ticket {ticket}\r\n\r\n",
        target.path, target.authority
    );
    stream.write_all(head.as_bytes()).await?;
    let leftover = switched(&mut stream).await?;
    let (mut from_vm, mut to_vm) = stream.into_split();
    let mut stdout = tokio::io::stdout();
    stdout.write_all(&leftover).await?;
    stdout.flush().await?;
    let upstream = async {
        tokio::io::copy(&mut tokio::io::stdin(), &mut to_vm).await?;
        to_vm.shutdown().await
    };
    let downstream = async {
        tokio::io::copy(&mut from_vm, &mut stdout).await?;
        stdout.flush().await
    };
    // The session ends when the VM's side does (ssh closes stdin only after that), or when
    // the access proxy ends it (its credential revoked, say): then ssh still holds stdin open,
    // and the blocking read of it would hold the runtime's shutdown, so the process ends here.
    let ended = tokio::select! {
        done = downstream => done,
        done = upstream => done,
    };
    let code = i32::from(ended.is_err());
    std::process::exit(code)
}

/// Reads the answer's head: `101 Switching Protocols` gives what came after it; anything
/// else is the proxy's refusal, said as it said it.
async fn switched(stream: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
    let mut read = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the access proxy closed the connection without answering");
        }
        read.extend_from_slice(&chunk[..n]);
        if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&read[..end]).into_owned();
            let status = head.lines().next().unwrap_or_default();
            if status.split(' ').nth(1) == Some("101") {
                return Ok(read[end + 4..].to_vec());
            }
            // The refusal's JSON body (the proxy's error shape), read as far as it came.
            let mut body = read[end + 4..].to_vec();
            while body.len() < ANSWER_LIMIT {
                match tokio::time::timeout(
                    std::time::Duration::from_millis(500),
                    stream.read(&mut chunk),
                )
                .await
                {
                    Ok(Ok(n @ 1..)) => body.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| {
                    let message = v["message"].as_str().or(v["error"]["message"].as_str());
                    message.map(str::to_owned)
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_owned());
            bail!("the access proxy refused the session ({status}): {message}");
        }
        if read.len() > ANSWER_LIMIT {
            bail!("the access proxy's answer has no end to its head");
        }
    }
}

/// Where the grant's URL says to go.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// `host[:port]`, as the Host header says it.
    authority: String,
    host: String,
    port: u16,
    path: String,
}

impl Target {
    fn parse(url: &str) -> anyhow::Result<Target> {
        let Some(rest) = url.strip_prefix("http://") else {
            bail!(
                "the access proxy is at {url}: `einsora ssh` speaks plain HTTP to it only (a local \
                 Solo, or a TLS-terminating proxy on this machine)"
            );
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
                let port = port.parse().with_context(|| format!("{url}: not a port"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            bail!("{url} names no host");
        }
        Ok(Target {
            authority: authority.to_owned(),
            host: host.to_owned(),
            port,
            path: if path.is_empty() { "/" } else { path }.to_owned(),
        })
    }

    /// Names under `localhost` are this machine (RFC 6761), whatever the resolver says.
    fn connect_to(&self) -> (String, u16) {
        let local = self.host == "localhost" || self.host.ends_with(".localhost");
        let host = if local {
            "127.0.0.1"
        } else {
            self.host.as_str()
        };
        (host.trim_matches(['[', ']']).to_owned(), self.port)
    }
}

/// `text` as one word for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vms_url_is_reached_at_its_host_and_localhost_names_are_this_machine() {
        let t = Target::parse("http://w-0190.localhost:8081/_einsora/ssh").unwrap();
        assert_eq!(t.authority, "w-0190.localhost:8081");
        assert_eq!(t.path, "/_einsora/ssh");
        assert_eq!(t.connect_to(), ("127.0.0.1".to_owned(), 8081));
        let t = Target::parse("http://w-1.lab.example/_einsora/ssh").unwrap();
        assert_eq!(t.connect_to(), ("w-1.lab.example".to_owned(), 80));
        let err = Target::parse("https://w-1.lab.example/_einsora/ssh").unwrap_err();
        assert!(err.to_string().contains("plain HTTP"), "{err}");
        assert!(Target::parse("http://:80/x").is_err());
        assert!(Target::parse("http://h:port/x").is_err());
    }

    #[test]
    fn the_programs_path_is_one_word_for_the_shell() {
        assert_eq!(shell_quote("/usr/bin/einsora"), "'/usr/bin/einsora'");
        assert_eq!(shell_quote("/o'dd/einsora"), r"'/o'\''dd/einsora'");
    }
}
