//! Hostile workloads on the real engine: a notebook's own cell, run through its own browser
//! session, attacks what the host dials for it. Each attack ends with the attacker failed with
//! its fixed reason, the sibling's files and a canary socket (standing for the host's Docker
//! engine) never reached, and a sibling on the same machine starting and stopping as usual.
//! Needs what docker.rs needs (the engine, the images, EINSORA_TEST_MODEL).

use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::harness::notebooks::{open, run_cell, solo};
use crate::harness::solo::Solo;
use crate::harness::workloads::{state, timeline, wait_for};
use crate::harness::world::{Credential, a_notebook, call, launch, tenant};
use einsora_testkit::http::{exchange, request};

/// The attacker's fixed reason in its timeline.
const TAMPERED: &str = "its server's socket was replaced from inside the workload";

/// A Unix socket the test listens on, counting every connection it is handed.
struct Canary {
    _dir: tempfile::TempDir,
    path: String,
    accepted: Arc<AtomicUsize>,
}

impl Canary {
    fn listen() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docker.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Canary {
            path: path.display().to_string(),
            _dir: dir,
            accepted,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// What the attacker's session gets for `path` on its own host: status and body.
fn through_session(solo: &Solo, host: &str, cookie: &str, path: &str) -> (u16, String) {
    let origin = format!("http://{host}");
    let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
    let answer = exchange(&solo.access, &request("GET", path, host, &headers, ""));
    (answer.status, answer.body)
}

/// Waits until the attacker is failed for tampering.
fn assert_failed_for_tampering(solo: &Solo, who: &Credential, id: &str) {
    wait_for(solo, who, id, "failed");
    let events = timeline(solo, who, id);
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("failed: ") && e.contains(TAMPERED)),
        "{events:?}"
    );
}

/// The sibling still opens, runs a cell, and stops as usual.
fn assert_sibling_unharmed(solo: &Solo, who: &Credential, sibling: &str) {
    let (host, cookie) = open(solo, who, sibling);
    assert_eq!(run_cell(solo, &host, &cookie, "print(6 * 7)"), "42\n");
    let stopped = call(
        solo,
        who,
        "POST",
        &format!("/v1/workloads/{sibling}/stop"),
        None,
    );
    assert_eq!(stopped.status, 202, "{}", stopped.body);
    wait_for(solo, who, sibling, "stopped");
}

/// Attack 1: the cell points its socket at a sibling's (and writes a token file where the old
/// layout kept it). The agent fails it; its session never lists the sibling's files.
#[test]
fn a_notebook_that_links_its_socket_to_a_siblings_is_failed_and_reaches_nothing() {
    let (solo, _leftovers) = solo();
    solo.expect_log("its socket was tampered with; failing it");
    solo.expect_log("not the workload's own socket");
    let acme = tenant(&solo, "dev@acme");
    let attacker = launch(&solo, &acme.token, a_notebook("attacker"));
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for(&solo, &acme.session, &attacker, "running");
    wait_for(&solo, &acme.session, &sibling, "running");
    let marker = "sibling-secret-3f9c.txt";
    let sibling_data = solo.e.dir().join("agent").join("data").join(&sibling);
    std::fs::write(sibling_data.join(marker), b"not yours").unwrap();

    let (host, cookie) = open(&solo, &acme.session, &attacker);
    let cell = format!(
        r#"import os
out = []
try:
    open('/run/secrets/einsora/token', 'w').write('x')
    out.append('token written')
except OSError as e:
    out.append('token: ' + type(e).__name__)
open('/run/einsora/token', 'w').write('x\ny')
os.symlink('../{sibling}/jl.sock', '/run/einsora/flip')
os.rename('/run/einsora/flip', '/run/einsora/jl.sock')
print(' '.join(out))"#
    );
    let said = run_cell(&solo, &host, &cookie, &cell);
    assert!(
        said.contains("token: OSError") || said.contains("token: PermissionError"),
        "the mounted token must be read-only: {said}"
    );
    assert_failed_for_tampering(&solo, &acme.session, &attacker);
    let (status, body) = through_session(&solo, &host, &cookie, "/api/contents");
    assert!(!body.contains(marker), "{status}: {body}");
    assert_ne!(status, 200, "{body}");
    assert_sibling_unharmed(&solo, &acme.session, &sibling);
}

/// Attack 2: the cell keeps JupyterLab under a hard link and flips `jl.sock` to the engine's
/// socket (a canary here) thousands of times a second while the session asks for the engine's
/// version. Nothing reaches the canary; the attacker is failed.
#[test]
fn a_notebook_that_flips_its_socket_to_the_engine_never_reaches_it() {
    let (solo, _leftovers) = solo();
    solo.expect_log("its socket was tampered with; failing it");
    solo.expect_log("not the workload's own socket");
    // Its server is killed as it is failed, perhaps while the session's request is on it.
    solo.expect_log("the workload did not answer");
    let acme = tenant(&solo, "dev@acme");
    let canary = Canary::listen();
    let attacker = launch(&solo, &acme.token, a_notebook("attacker"));
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for(&solo, &acme.session, &attacker, "running");
    let (host, cookie) = open(&solo, &acme.session, &attacker);
    let cell = format!(
        r#"import os, threading, time
def flip():
    os.link('/run/einsora/jl.sock', '/run/einsora/keep.sock')
    end = time.time() + 20
    while time.time() < end:
        try:
            os.symlink({canary:?}, '/run/einsora/t')
            os.rename('/run/einsora/t', '/run/einsora/jl.sock')
            os.rename('/run/einsora/keep.sock', '/run/einsora/jl.sock')
            os.link('/run/einsora/jl.sock', '/run/einsora/keep.sock')
        except OSError:
            pass
threading.Thread(target=flip, daemon=True).start()
print('flipping')"#,
        canary = canary.path
    );
    assert_eq!(run_cell(&solo, &host, &cookie, &cell), "flipping\n");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut asked = 0;
    while state(&solo, &acme.session, &attacker) != "failed" {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            timeline(&solo, &acme.session, &attacker)
        );
        let (_, body) = through_session(&solo, &host, &cookie, "/v1.41/version");
        assert!(!body.contains("ApiVersion"), "the engine answered: {body}");
        asked += 1;
    }
    assert!(asked > 0);
    assert_failed_for_tampering(&solo, &acme.session, &attacker);
    assert_eq!(canary.accepted(), 0, "the canary was dialled");
    wait_for(&solo, &acme.session, &sibling, "running");
    assert_sibling_unharmed(&solo, &acme.session, &sibling);
}

/// The variants, from cells of their own: a FIFO, a regular file, a directory, a hard link in
/// place of the socket. Each attacker is failed with the same reason; a sibling started after
/// them all runs.
#[test]
fn whatever_replaces_the_socket_the_workload_is_failed() {
    let (solo, _leftovers) = solo();
    solo.expect_log("its socket was tampered with; failing it");
    solo.expect_log("not the workload's own socket");
    let acme = tenant(&solo, "dev@acme");
    let variants: [(&str, &str); 4] = [
        ("fifo", "os.mkfifo('/run/einsora/t')"),
        ("file", "open('/run/einsora/t', 'w').write('x')"),
        ("dir", "os.mkdir('/run/einsora/t')"),
        (
            "hardlink",
            "os.link('/run/einsora/jl.sock', '/run/einsora/t')",
        ),
    ];
    let ids: Vec<String> = variants
        .iter()
        .map(|(name, _)| launch(&solo, &acme.token, a_notebook(name)))
        .collect();
    for ((name, make), id) in variants.iter().zip(&ids) {
        wait_for(&solo, &acme.session, id, "running");
        let (host, cookie) = open(&solo, &acme.session, id);
        let replace = if *name == "hardlink" {
            // The second name alone is the tampering: the socket keeps its own.
            String::new()
        } else if *name == "dir" {
            "os.rename('/run/einsora/jl.sock', '/run/einsora/aside.sock')\n\
             os.rename('/run/einsora/t', '/run/einsora/jl.sock')"
                .to_owned()
        } else {
            "os.rename('/run/einsora/t', '/run/einsora/jl.sock')".to_owned()
        };
        let cell = format!("import os\n{make}\n{replace}\nprint('{name}')");
        assert_eq!(run_cell(&solo, &host, &cookie, &cell), format!("{name}\n"));
    }
    for id in &ids {
        assert_failed_for_tampering(&solo, &acme.session, id);
    }
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for(&solo, &acme.session, &sibling, "running");
    assert_sibling_unharmed(&solo, &acme.session, &sibling);
}

/// Attack 3: one line in the token file the old layout read. The machine keeps obeying: the
/// attacker keeps running (its token isn't read back), and a sibling starts and stops.
#[test]
fn a_bad_token_file_freezes_nothing() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let attacker = launch(&solo, &acme.token, a_notebook("attacker"));
    wait_for(&solo, &acme.session, &attacker, "running");
    let (host, cookie) = open(&solo, &acme.session, &attacker);
    let cell = "import os\n\
                open('/run/einsora/token', 'w').write('x\\ny')\n\
                os.mkdir('/run/einsora/api-key')\n\
                open('/run/einsora/huge', 'wb').write(b'\\xff' * (4 << 20))\n\
                print('written')";
    assert_eq!(run_cell(&solo, &host, &cookie, cell), "written\n");
    let sibling = launch(&solo, &acme.token, a_notebook("sibling"));
    wait_for(&solo, &acme.session, &sibling, "running");
    assert_sibling_unharmed(&solo, &acme.session, &sibling);
    assert_eq!(state(&solo, &acme.session, &attacker), "running");
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    let logs = solo.logs();
    assert!(!logs.contains("panicked"), "{logs}");
}
