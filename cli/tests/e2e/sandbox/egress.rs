//! Outbound network for the owner's notebooks, tried from both sides: a notebook fetches a
//! page from a server on a network of the test's own (standing for the internet), while
//! nothing connects in to it (not the host, not a machine on that network routing to it, not a
//! sibling notebook) and, from inside, every address of the host refuses it, even a port the
//! test listens on on all addresses.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::host::{container_of, host_addresses, inspect, interfaces, pid_of};
use super::kernel::Kernel;
use crate::harness::lan::{Host, Lan};
use crate::harness::notebooks::{open, solo, solo_native};
use crate::harness::solo::Solo;
use crate::harness::workloads::{wait_for, wait_for_within};
use crate::harness::world::{Credential, a_notebook, call, launch, tenant};

/// Where the notebook listens, inside its container, on every address it has.
const INSIDE_PORT: u16 = 8765;

/// Starts a listener on 0.0.0.0:INSIDE_PORT that records who connects (`accepted`), then
/// fetches OUTSIDE and tries each of HOST (`[address, port]` pairs); its own listener answers.
const REACH_OUT: &str = r#"
import json, socket, threading, urllib.request
accepted = []
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", INSIDE_PORT))
srv.listen(16)
def serve():
    while True:
        c, a = srv.accept()
        accepted.append(a[0])
        c.close()
threading.Thread(target=serve, daemon=True).start()
def reach(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return 0
    except OSError as e:
        return e.errno or -1
    finally:
        s.close()
try:
    fetched = urllib.request.urlopen("http://OUTSIDE/page.txt", timeout=15).read().decode()
except OSError as e:
    fetched = repr(e)
print(json.dumps({
    "fetched": fetched,
    "host": {f"{h}:{p}": reach(h, p) for h, p in HOST},
    "own": reach("127.0.0.1", INSIDE_PORT),
}))
"#;

/// A sibling's try at the notebook's listener.
const KNOCK: &str = r#"
import json, socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("TARGET", INSIDE_PORT))
    print(json.dumps(0))
except OSError as e:
    print(json.dumps(e.errno or -1))
"#;

/// A static page served in a namespace of the test's own, stopped (by PID) when dropped.
struct Outside {
    server: Child,
    address: SocketAddr,
    _files: tempfile::TempDir,
}

impl Outside {
    fn start(on: &Host, ip: &str) -> Outside {
        let files = tempfile::tempdir().unwrap();
        std::fs::write(files.path().join("page.txt"), "hello from outside").unwrap();
        // Its own port: one namespace per test, so any fixed one is free.
        let address: SocketAddr = format!("{ip}:8080").parse().unwrap();
        let mut serve = Command::new("python3");
        serve
            .args(["-m", "http.server", "8080", "--bind", ip, "--directory"])
            .arg(files.path());
        let server = on
            .wrap(&serve)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let outside = Outside {
            server,
            address,
            _files: files,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the outside server never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        outside
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A port on all of the host's addresses, counting who connects.
fn host_listener() -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::Relaxed);
            drop(stream);
        }
    });
    (port, count)
}

/// The container's address and gateway on the egress network.
fn egress_address(container: &str) -> (String, String) {
    let networks = &inspect(container)["NetworkSettings"]["Networks"];
    let ours = &networks[einsora_agent::drivers::docker::EGRESS_NETWORK];
    let field = |name: &str| ours[name].as_str().unwrap_or_default().to_owned();
    assert!(
        !field("IPAddress").is_empty(),
        "on the egress network only: {networks}"
    );
    (field("IPAddress"), field("Gateway"))
}

/// What a test's network is: the outside server on a machine of the test's own, and a port the
/// host listens on on all its addresses, counting who connects.
struct World {
    lan: Lan,
    machine: Host,
    outside: Outside,
    listening: u16,
    connected: Arc<AtomicU32>,
}

impl World {
    fn new() -> World {
        let lan = Lan::new();
        let machine = lan.host();
        let outside = Outside::start(&machine, &machine.address);
        let (listening, connected) = host_listener();
        World {
            lan,
            machine,
            outside,
            listening,
            connected,
        }
    }
}

#[test]
fn an_owners_notebook_reaches_out_and_nothing_reaches_in() {
    let world = World::new();
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let nb = launch(&solo, &acme.token, a_notebook("nb"));
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for(&solo, &acme.session, &nb, "running");
    wait_for(&solo, &acme.session, &sibling, "running");
    let container = container_of(&nb);
    assert_eq!(
        interfaces(pid_of(&container)).len(),
        2,
        "loopback and its one interface"
    );
    let (ip, gateway) = egress_address(&container);
    from_both_sides(&world, &solo, &acme.session, [&nb, &sibling], &ip, &gateway);
}

/// The same on the linux-native driver: the owner's notebook in a network namespace of the
/// agent's, on its own bridge; the fence goes when the notebook stops, and so does the namespace.
#[test]
fn an_owners_native_notebook_reaches_out_and_nothing_reaches_in() {
    let world = World::new();
    let (solo, _leftovers) = solo_native(&[]);
    let acme = tenant(&solo, "dev@acme");
    let nb = launch(&solo, &acme.token, a_notebook("nb"));
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for_within(&solo, &acme.session, &nb, "running", NATIVE_FIRST_START);
    wait_for_within(
        &solo,
        &acme.session,
        &sibling,
        "running",
        NATIVE_FIRST_START,
    );
    let netns = einsora_agent::drivers::native::netns_name(&nb);
    let inside = |args: &[&str]| {
        let out = Command::new("ip")
            .args(["-n", &netns])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "ip -n {netns} {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let links = inside(&["-o", "link"]);
    assert_eq!(
        links.lines().count(),
        2,
        "loopback and its one interface: {links}"
    );
    let address = inside(&["-4", "-o", "addr", "show", "dev", "eth0"]);
    let ip = address
        .split_whitespace()
        .nth(3)
        .and_then(|cidr| cidr.split('/').next())
        .unwrap_or_else(|| panic!("an address: {address}"))
        .to_owned();
    assert!(
        inside(&["-6", "-o", "addr"]).trim().is_empty(),
        "no IPv6 inside"
    );
    let route = inside(&["route", "show", "default"]);
    let gateway = route
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_owned();
    assert!(!gateway.is_empty(), "a default route: {route}");
    from_both_sides(&world, &solo, &acme.session, [&nb, &sibling], &ip, &gateway);

    let netns_file = std::path::Path::new("/run/netns").join(&netns);
    assert!(netns_file.exists());
    let stopped = call(
        &solo,
        &acme.session,
        "POST",
        &format!("/v1/workloads/{nb}/stop"),
        None,
    );
    assert!((200..300).contains(&stopped.status), "{}", stopped.body);
    wait_for(&solo, &acme.session, &nb, "stopped");
    let deadline = Instant::now() + Duration::from_secs(30);
    while netns_file.exists() {
        assert!(Instant::now() < deadline, "its namespace outlived it");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Its environment is built on first use (see native.rs).
const NATIVE_FIRST_START: Duration = Duration::from_secs(600);

/// From both sides, a notebook (`ids[0]`) at `ip` behind `gateway` and its sibling (`ids[1]`):
/// it fetches the outside page; from inside, every host address refuses it, the listener sees
/// no one; the host, a machine outside routing to it and its sibling can't connect to a
/// listener it opens, which its own loopback reaches.
fn from_both_sides(
    world: &World,
    solo: &Solo,
    session: &Credential,
    [nb, sibling]: [&str; 2],
    ip: &str,
    gateway: &str,
) {
    let World {
        lan,
        machine,
        outside,
        listening,
        connected,
    } = world;
    let listening = *listening;
    let api_port: u16 = solo.http.rsplit_once(':').unwrap().1.parse().unwrap();
    let mut host: Vec<(String, u16)> = vec![
        (gateway.to_owned(), listening),
        (gateway.to_owned(), api_port),
        (lan.address(), listening),
    ];
    host.extend(host_addresses().into_iter().map(|a| (a, listening)));
    let (page, cookie) = open(solo, session, nb);
    let mut kernel = Kernel::start(solo, &page, &cookie);
    let cell = REACH_OUT
        .replace("INSIDE_PORT", &INSIDE_PORT.to_string())
        .replace("OUTSIDE", &outside.address.to_string())
        .replace("HOST", &serde_json::to_string(&host).unwrap());
    let seen = kernel.json(&cell);
    assert_eq!(
        seen["fetched"], "hello from outside",
        "it reaches out: {seen}"
    );
    assert_eq!(seen["own"], 0, "its own listener answers it: {seen}");
    for (address, port) in &host {
        let tried = &seen["host"][format!("{address}:{port}")];
        assert_ne!(
            tried,
            &json!(0),
            "the host's {address}:{port} let it in: {seen}"
        );
    }
    assert_eq!(
        connected.load(Ordering::Relaxed),
        0,
        "nothing from inside reached the host's listener"
    );

    // Nothing connects in: the host, a machine on the outside network that routes to it, a
    // sibling notebook on the same network.
    let target: SocketAddr = format!("{ip}:{INSIDE_PORT}").parse().unwrap();
    assert!(
        TcpStream::connect_timeout(&target, Duration::from_secs(3)).is_err(),
        "the host connected to the notebook"
    );
    let mut route = Command::new("ip");
    route.args(["route", "add", &format!("{ip}/32"), "via", &lan.address()]);
    assert!(
        machine.wrap(&route).status().unwrap().success(),
        "a route in"
    );
    let mut knock = Command::new("python3");
    knock.args([
        "-c",
        &format!("import socket; socket.create_connection(('{ip}', {INSIDE_PORT}), 3)"),
    ]);
    let knocked = machine.wrap(&knock).stderr(Stdio::null()).status().unwrap();
    assert!(
        !knocked.success(),
        "a machine outside connected to the notebook"
    );
    let (page, cookie) = open(solo, session, sibling);
    let mut neighbour = Kernel::start(solo, &page, &cookie);
    let cell = KNOCK
        .replace("INSIDE_PORT", &INSIDE_PORT.to_string())
        .replace("TARGET", ip);
    assert_ne!(
        neighbour.json(&cell),
        json!(0),
        "a sibling connected to the notebook"
    );

    let accepted = kernel.json("import json; print(json.dumps(accepted))");
    assert_eq!(
        accepted,
        json!(["127.0.0.1"]),
        "only its own probe reached its listener"
    );
}
