//! `einsora up` and `einsora dev` as the operator meets them: the first run without an owner,
//! a healthy installation and what it keeps on disk, a port already taken, a crashed role, a
//! clean stop, and the development all-in-one. Bounds are generous: a loaded 2-core machine.

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use einsora_testkit::{Port, eventually};
use serde_json::json;

use crate::harness::cli::dev_password;
use crate::harness::solo::{Engine, OWNER_EMAIL, OWNER_PASSWORD, Solo, make_owner};
use crate::harness::support::{Einsora, finish, processes_on, signal, stderr};

const ROLES: [&str; 5] = ["api", "controller", "metering", "access", "gateway"];
const WITHIN: Duration = Duration::from_secs(60);

fn log_in(solo: &Solo, email: &str, password: &str) -> u16 {
    let body = json!({ "email": email, "password": password }).to_string();
    let headers = [("Content-Type", "application/json")];
    solo.request("POST", "/v1/sessions", &headers, Some(&body))
        .status
}

#[test]
fn without_a_terminal_or_an_owner_up_says_how_to_make_one_and_listens_on_nothing() {
    let e = Einsora::new();
    let ports = (Port::loopback(), Port::loopback());
    let (http, access) = (ports.0.to_string(), ports.1.to_string());
    let env = [
        ("EINSORA_HTTP_ADDR", http.as_str()),
        ("EINSORA_ACCESS_ADDR", access.as_str()),
    ];
    let out = finish(e.spawn(&["up"], &env), WITHIN);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("`einsora setup --email") && err.contains("--password-stdin`"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    for addr in [&http, &access] {
        assert!(TcpStream::connect(addr).is_err(), "{addr} is listening");
    }
    assert!(processes_on(e.dir()).is_empty(), "a process was left");
}

/// `einsora setup` without `--password-stdin` asks in the terminal, twice (util-linux's `script`
/// gives it one; what is typed arrives before the echo is off, so it isn't checked here), and
/// without a terminal says how to pass the password instead.
#[test]
fn setup_asks_for_the_password_in_a_terminal_and_without_one_says_how() {
    let e = Einsora::new();
    let out = e.run(&["setup", "--email", OWNER_EMAIL], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no terminal to ask for the password in: pass it on standard input with --password-stdin"),
        "{}",
        stderr(&out)
    );
    assert!(!e.db().exists(), "nothing was made");
    let in_a_terminal = |typed: String| {
        let mut script = std::process::Command::new("script");
        script
            .args(["--quiet", "--return", "--command"])
            .arg(format!(
                "{} setup --email {OWNER_EMAIL}",
                env!("CARGO_BIN_EXE_einsora")
            ))
            .arg("/dev/null")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("EINSORA_DATA_DIR", e.dir());
        crate::harness::support::fed(script, &typed)
    };
    let differ = in_a_terminal(format!("{OWNER_PASSWORD}\nnot the same password\n"));
    let said = String::from_utf8_lossy(&differ.stdout);
    assert!(!differ.status.success(), "{said}");
    assert!(
        said.contains("the passwords differ; nothing was changed"),
        "{said}"
    );
    let made = in_a_terminal(format!("{OWNER_PASSWORD}\n{OWNER_PASSWORD}\n"));
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{said}");
    assert!(said.contains("Password again: "), "{said}");
    assert!(
        said.contains(&format!("created the owner account {OWNER_EMAIL}")),
        "{said}"
    );
}

#[test]
fn with_an_owner_up_serves_every_role_and_keeps_its_data_private() {
    let e = Einsora::new();
    std::fs::set_permissions(e.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let solo = Solo::launch(e, Engine::Sqlite, &[]);
    let ready = format!("Einsora is ready: http://{}/", solo.http);
    assert!(solo.stdout().contains(&ready), "{}", solo.stdout());

    // The API answers through the gateway, and the owner made by `einsora setup` logs in.
    let me = solo.request("GET", "/v1/me", &[], None);
    assert_eq!(me.status, 401, "the api answers: {}", me.body);
    assert_eq!(log_in(&solo, OWNER_EMAIL, OWNER_PASSWORD), 200);
    let access = TcpStream::connect(&solo.access).map(|_| ());
    assert!(access.is_ok(), "access listens on {}", solo.access);

    let mode = std::fs::metadata(solo.e.dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the data dir is owner-only");
    let pki = solo.e.dir().join("pki");
    for role in ROLES.iter().chain(&["ca"]) {
        for ext in ["pem", "key"] {
            let file = pki.join(format!("{role}.{ext}"));
            assert!(file.is_file(), "{} is missing", file.display());
        }
    }

    let log = std::fs::read_to_string(solo.log_file()).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for role in ROLES.iter().chain(&["up"]) {
        assert!(
            lines.iter().any(|l| l["role"] == *role),
            "no JSON line from {role} in einsora.log:\n{log}"
        );
    }
    let terminal = solo.logs();
    for role in ROLES {
        let prefix = format!("{role:<10} | ");
        assert!(terminal.contains(&prefix), "no {role} lines:\n{terminal}");
    }
}

#[test]
fn a_port_in_use_is_one_line_naming_it_and_its_setting() {
    for setting in ["EINSORA_HTTP_ADDR", "EINSORA_ACCESS_ADDR"] {
        let e = Einsora::new();
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let other = if setting == "EINSORA_HTTP_ADDR" {
            "EINSORA_ACCESS_ADDR"
        } else {
            "EINSORA_HTTP_ADDR"
        };
        let free = Port::loopback();
        let (addr_text, free_text) = (addr.to_string(), free.to_string());
        let env = [
            ("EINSORA_AUTH_MODE", "dev"),
            (setting, addr_text.as_str()),
            (other, free_text.as_str()),
        ];
        let out = finish(e.spawn(&["up"], &env), WITHIN);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(&format!("port {}", addr.port())), "{err}");
        assert!(err.contains(setting), "{err}");
        assert!(processes_on(e.dir()).is_empty(), "a process was left");
    }
}

#[test]
fn a_machine_owner_that_does_not_exist_stops_up_naming_the_setting() {
    let e = Einsora::new();
    let database = format!("sqlite:{}", e.db().display());
    make_owner(&e, &database);
    let ports = (Port::loopback(), Port::loopback());
    let (http, access) = (ports.0.to_string(), ports.1.to_string());
    let env = [
        ("EINSORA_HTTP_ADDR", http.as_str()),
        ("EINSORA_ACCESS_ADDR", access.as_str()),
        ("EINSORA_MACHINE_OWNER", "nobody"),
    ];
    let out = finish(e.spawn(&["up"], &env), WITHIN);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("EINSORA_MACHINE_OWNER: there is no tenant `nobody`"),
        "{err}"
    );
    assert!(!e.dir().join("agent/machine-id").exists(), "nothing joined");
    assert!(processes_on(e.dir()).is_empty(), "a process was left");
}

#[test]
fn a_killed_role_is_restarted_and_the_api_keeps_answering() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    solo.expect_log("stopped unexpectedly; restarting");
    let password = dev_password(&solo, "dev@acme");
    for role in ["controller", "api"] {
        let killed = solo.child(role).expect("the role runs");
        signal(killed, "KILL");
        eventually(format!("{role} runs again"), WITHIN, || {
            solo.child(role).filter(|&pid| pid != killed)
        });
        // dev mode's passwords are new at every start of the api.
        let password = match role {
            "api" => eventually("the api seeds again", WITHIN, || {
                Some(dev_password(&solo, "dev@acme")).filter(|p| *p != password)
            }),
            _ => password.clone(),
        };
        eventually("the API answers", WITHIN, || {
            (log_in(&solo, "dev@acme", &password) == 200).then_some(())
        });
    }
    let logs = solo.logs();
    assert!(logs.contains("stopped unexpectedly; restarting"), "{logs}");
    assert_eq!(solo.children().len(), ROLES.len(), "{:?}", solo.children());
}

#[test]
fn sigterm_stops_every_role_and_leaves_no_process_behind() {
    let mut solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let children = solo.children();
    let mut roles: Vec<&str> = children.iter().map(|(_, r)| r.as_str()).collect();
    roles.sort_unstable();
    let mut expected = ROLES.to_vec();
    expected.sort_unstable();
    assert_eq!(roles, expected);

    let out = solo.stop();
    assert!(out.status.success(), "up exit: {:?}", out.status);
    for (pid, role) in &children {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        assert!(!alive, "{role} ({pid}) outlived up");
    }
    assert!(processes_on(solo.e.dir()).is_empty(), "a process was left");
    assert!(TcpStream::connect(&solo.http).is_err(), "still listening");
}

#[test]
fn einsora_dev_runs_with_seeded_users_on_a_temporary_sqlite() {
    let e = Einsora::new();
    let home = e.dir().join("home");
    std::fs::create_dir(&home).unwrap();
    let ports = (Port::loopback(), Port::loopback());
    let (http, access) = (ports.0.to_string(), ports.1.to_string());
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("EINSORA_HTTP_ADDR", http.as_str()),
        ("EINSORA_ACCESS_ADDR", access.as_str()),
    ];
    let mut command = e.command(&["dev"], &env);
    command.env_remove("EINSORA_DATA_DIR");
    let dev = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut solo = Solo::watch(e, dev, http, access, String::new());
    solo.hold(ports.0);
    solo.hold(ports.1);
    let password = dev_password(&solo, "dev@globex");
    assert_eq!(log_in(&solo, "dev@globex", &password), 200);

    let api = solo.child("api").unwrap();
    let environ = std::fs::read(format!("/proc/{api}/environ")).unwrap();
    let data_dir = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"EINSORA_DATA_DIR="))
        .map(|v| std::path::PathBuf::from(String::from_utf8_lossy(v).into_owned()))
        .expect("the api has a data dir");
    assert!(data_dir.starts_with(std::env::temp_dir()), "{data_dir:?}");
    assert!(
        data_dir.join("einsora.db").is_file(),
        "SQLite in {data_dir:?}"
    );
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "HOME untouched"
    );

    assert!(solo.stop().status.success());
    assert!(!data_dir.exists(), "the temporary data dir outlived dev");
}
