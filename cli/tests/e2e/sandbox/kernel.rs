//! A notebook's kernel driven over its WebSocket through the access proxy, and the cells the
//! sandbox tests run on it.

use serde_json::{Value, json};

use crate::harness::notebooks::notebook;
use crate::harness::solo::Solo;
use crate::harness::wire::WebSocket;

/// A kernel of the notebook, over its WebSocket through the proxy; cells run on it in turn.
pub struct Kernel {
    ws: WebSocket,
    cells: u32,
}

/// What a cell came to.
#[derive(Debug, PartialEq)]
pub enum Ran {
    /// Its standard output.
    Printed(String),
    /// `ename: evalue` of the exception it raised.
    Raised(String),
    /// Its kernel died (`restarting` or `dead`, as the server says).
    Died(String),
}

impl Kernel {
    pub fn start(solo: &Solo, host: &str, cookie: &str) -> Kernel {
        let kernel = notebook(solo, host, cookie, "POST", "/api/kernels", "{}");
        let path = format!("/api/kernels/{}/channels", kernel["id"].as_str().unwrap());
        let origin = format!("http://{host}");
        let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
        let ws = WebSocket::connect(&solo.access, host, &path, &headers).unwrap();
        Kernel { ws, cells: 0 }
    }

    /// Runs `code` until its kernel is idle again (every output is sent before that), or dies.
    pub fn run(&mut self, code: &str) -> Ran {
        self.cells += 1;
        let msg_id = format!("cell-{}", self.cells);
        let execute = json!({
            "header": { "msg_id": msg_id, "username": "test", "session": "s-1",
                        "msg_type": "execute_request", "version": "5.3", "date": "" },
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": { "code": code, "silent": false, "store_history": false,
                         "user_expressions": {}, "allow_stdin": false, "stop_on_error": true },
        });
        self.ws.send(&execute.to_string());
        let (mut printed, mut raised) = (String::new(), None);
        loop {
            let message: Value = serde_json::from_str(&self.ws.receive()).unwrap();
            let ours = message["parent_header"]["msg_id"] == msg_id.as_str();
            let content = &message["content"];
            match message["header"]["msg_type"].as_str() {
                Some("stream") if ours && content["name"] == "stdout" => {
                    printed.push_str(content["text"].as_str().unwrap());
                }
                Some("error") if ours => {
                    raised = Some(format!("{}: {}", content["ename"], content["evalue"]));
                }
                Some("status") => match content["execution_state"].as_str() {
                    Some("idle") if ours => {
                        return raised.map_or(Ran::Printed(printed), Ran::Raised);
                    }
                    Some(state @ ("restarting" | "dead")) => return Ran::Died(state.into()),
                    _ => {}
                },
                _ => {}
            }
        }
    }

    /// Runs `code`, which prints one line of JSON; that JSON.
    pub fn json(&mut self, code: &str) -> Value {
        match self.run(code) {
            Ran::Printed(out) => {
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
            }
            other => panic!("the cell didn't print: {other:?}"),
        }
    }
}

/// What a cell reports about its own process and sandbox: `GATEWAY` is the gateway's port on
/// the host's loopback, `OUTSIDE` the addresses to try.
pub const PROBE: &str = r#"
import json, os, socket
def field(name):
    for line in open("/proc/self/status"):
        if line.startswith(name + ":"):
            return line.split()[1]
def write(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return 0
    except OSError as e:
        return e.errno
def reach(family, kind, addr):
    s = socket.socket(family, kind)
    s.settimeout(5)
    try:
        if kind == socket.SOCK_DGRAM:
            s.sendto(b"x", addr)
        else:
            s.connect(addr)
        return 0
    except OSError as e:
        return e.errno or -1
    finally:
        s.close()
tcp, udp = socket.SOCK_STREAM, socket.SOCK_DGRAM
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
    "CapEff": field("CapEff"), "CapPrm": field("CapPrm"), "CapBnd": field("CapBnd"),
    "NoNewPrivs": field("NoNewPrivs"),
    "usr": write("/usr/einsora-probe"), "root": write("/einsora-probe"),
    "interfaces": [name for _, name in socket.if_nameindex()],
    "outside": {a: reach(socket.AF_INET, tcp, (a, 80)) for a in OUTSIDE},
    "udp": reach(socket.AF_INET, udp, ("1.1.1.1", 53)),
    "ipv6": reach(socket.AF_INET6, tcp, ("2606:4700:4700::1111", 443)),
    "gateway": reach(socket.AF_INET, tcp, ("127.0.0.1", GATEWAY)),
}))
"#;

/// Forks children that sleep until fork fails (bounded at 1000), then kills them all.
pub const FORK_BOMB: &str = r#"
import json, os, signal, time
kids, failed = [], None
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        failed = e.errno
        break
    if pid == 0:
        try:
            time.sleep(120)
        finally:
            os._exit(0)
    kids.append(pid)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print(json.dumps({"forked": len(kids), "errno": failed}))
"#;

/// 3 GiB, every page written.
pub const MEMORY_HOG: &str = r#"
hog = []
for _ in range(3 * 1024):
    hog.append(b"x" * (1 << 20))
print("it kept", len(hog), "MiB")
"#;
