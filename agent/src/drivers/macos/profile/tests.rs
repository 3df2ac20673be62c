use std::path::{Path, PathBuf};

use super::check::{Addr, Rules, Target};
use super::*;

const RUN: &str = "/private/tmp/einsora-501/0192f0c4";
const DATA: &str = "/Users/ada/Library/Application Support/Einsora/agent/data/0192f0c4";
const ENV: &str = "/Users/ada/Library/Application Support/Einsora/envs/jupyterlab-3f2a";

fn notebook(gpu: bool, outbound: bool) -> Profile {
    Profile::new(Profile {
        data: DATA.into(),
        run: RUN.into(),
        tmp: format!("{RUN}-tmp").into(),
        programs: vec![ENV.into()],
        read_only: vec![format!("{RUN}-secret/token").into()],
        socket: format!("{RUN}/jl.sock").into(),
        gpu,
        outbound,
    })
    .unwrap()
}

fn rules(profile: &Profile) -> Rules {
    Rules::parse(&profile.render()).unwrap()
}

fn path(p: &str) -> Target<'_> {
    Target::Path(Path::new(p))
}

/// The profile is committed (`profile/notebook.sb`), so a change to it is one a reviewer reads
/// rule by rule. After changing the renderer:
/// `EINSORA_UPDATE_PROFILES=1 cargo test -p einsora-agent macos::profile`, and commit it.
#[test]
#[allow(clippy::disallowed_methods)] // the test's own switch
fn a_notebooks_profile_is_the_committed_one() {
    let rendered = notebook(true, true).render();
    let committed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/drivers/macos/profile/notebook.sb"
    );
    if std::env::var_os("EINSORA_UPDATE_PROFILES").is_some() {
        std::fs::write(committed, &rendered).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(committed).unwrap_or_default(),
        rendered,
        "regenerate with EINSORA_UPDATE_PROFILES=1 cargo test -p einsora-agent macos::profile"
    );
}

#[test]
fn every_rule_says_what_it_is_for() {
    let rendered = notebook(true, true).render();
    for block in rendered.split("\n\n").skip(1) {
        assert!(
            block.starts_with("; "),
            "a rule without its reason:\n{block}"
        );
        assert!(
            block.lines().any(|l| l.starts_with('(')),
            "a reason without a rule:\n{block}"
        );
    }
}

#[test]
fn no_ip_listener_explicit_or_implicit_and_no_inbound_connection() {
    for outbound in [false, true] {
        let rules = rules(&notebook(true, outbound));
        for local in [Addr::Tcp(8888), Addr::Tcp(0), Addr::Udp(5353), Addr::Udp(0)] {
            assert!(
                !rules.allows("network-bind", Target::Local(local)),
                "{local:?}"
            );
            assert!(
                !rules.allows("network-inbound", Target::Local(local)),
                "{local:?}"
            );
        }
        // A UDP socket's first send binds it to a port that then receives.
        for remote in [Addr::Udp(53), Addr::Udp(443)] {
            assert!(
                !rules.allows("network-outbound", Target::Remote(remote)),
                "{remote:?}"
            );
        }
        assert_eq!(
            rules.allows("network-outbound", Target::Remote(Addr::Tcp(443))),
            outbound,
            "TCP out only with the owner's egress"
        );
    }
}

#[test]
fn its_one_listener_is_a_unix_socket_in_its_run_directory() {
    let rules = rules(&notebook(false, false));
    let socket = PathBuf::from(format!("{RUN}/jl.sock"));
    let kernel = PathBuf::from(format!("{RUN}/kernel-1.ipc"));
    for ok in [&socket, &kernel] {
        assert!(rules.allows("network-bind", Target::Local(Addr::Unix(ok))));
        assert!(rules.allows("network-inbound", Target::Local(Addr::Unix(ok))));
    }
    assert!(rules.allows("network-outbound", Target::Remote(Addr::Unix(&kernel))));
    let elsewhere = Path::new("/private/tmp/einsora-501/0192f0c5/jl.sock");
    assert!(!rules.allows("network-bind", Target::Local(Addr::Unix(elsewhere))));
    assert!(!rules.allows("network-outbound", Target::Remote(Addr::Unix(elsewhere))));
    let resolver = Path::new("/private/var/run/mDNSResponder");
    assert!(rules.allows("network-outbound", Target::Remote(Addr::Unix(resolver))));
    let docker = Path::new("/Users/ada/.docker/run/docker.sock");
    assert!(!rules.allows("network-outbound", Target::Remote(Addr::Unix(docker))));
}

#[test]
fn it_writes_only_its_own_directories_and_reads_none_of_the_owners() {
    let rules = rules(&notebook(true, true));
    for (op, mine) in [
        ("file-write-create", format!("{DATA}/analysis.ipynb")),
        ("file-write-data", format!("{DATA}/nested/data.csv")),
        ("file-write-unlink", format!("{RUN}/jl.sock")),
        ("file-write-create", format!("{RUN}-tmp/scratch")),
        ("file-read-data", format!("{DATA}/analysis.ipynb")),
        ("file-read-data", format!("{ENV}/bin/python3")),
        ("file-read-data", format!("{RUN}-secret/token")),
        (
            "file-read-data",
            "/System/Library/Frameworks/Metal.framework/Metal".into(),
        ),
    ] {
        assert!(rules.allows(op, path(&mine)), "{op} {mine}");
    }
    for (op, theirs) in [
        ("file-write-data", "/Users/ada/Documents/thesis.tex"),
        (
            "file-write-create",
            "/Users/ada/Library/LaunchAgents/evil.plist",
        ),
        (
            "file-write-create",
            "/Users/ada/Library/Application Support/Einsora/agent/data/0192f0c5/x",
        ),
        (
            "file-write-data",
            "/Users/ada/Library/Application Support/Einsora/einsora.db",
        ),
        (
            "file-write-data",
            "/private/tmp/einsora-501/0192f0c4-secret/token",
        ),
        (
            "file-write-data",
            "/Users/ada/Library/Application Support/Einsora/envs/jupyterlab-3f2a/bin/python3",
        ),
        ("file-read-data", "/Users/ada/.ssh/id_ed25519"),
        (
            "file-read-data",
            "/Users/ada/Library/Application Support/Einsora/agent/identity/key.pem",
        ),
        (
            "file-read-data",
            "/private/tmp/einsora-501/0192f0c5/jl.sock",
        ),
    ] {
        assert!(!rules.allows(op, path(theirs)), "{op} {theirs}");
    }
}

#[test]
fn only_its_environments_and_the_systems_programs_run() {
    let rules = rules(&notebook(true, true));
    assert!(rules.allows("process-exec", path(&format!("{ENV}/bin/python3"))));
    assert!(rules.allows("process-exec", path("/bin/sh")));
    assert!(rules.allows("process-fork", Target::Nothing));
    for downloaded in [format!("{DATA}/miner"), format!("{RUN}-tmp/a.out")] {
        assert!(
            !rules.allows("process-exec", path(&downloaded)),
            "{downloaded}"
        );
    }
    assert!(rules.allows("ipc-posix-shm-write-create", Target::Nothing));
    assert!(!rules.allows("ipc-posix-shmx", Target::Nothing));
    assert!(rules.allows("signal", Target::Signal { same_sandbox: true }));
    assert!(!rules.allows(
        "signal",
        Target::Signal {
            same_sandbox: false
        }
    ));
}

#[test]
fn metal_only_for_the_workload_holding_the_gpu() {
    let with = rules(&notebook(true, false));
    let without = rules(&notebook(false, false));
    for (op, target) in [
        ("iokit-open", Target::IoKit("AGXDeviceUserClient")),
        (
            "mach-lookup",
            Target::MachService("com.apple.MTLCompilerService"),
        ),
    ] {
        assert!(with.allows(op, target), "{op}");
        assert!(!without.allows(op, target), "{op}");
    }
    assert!(
        !with.allows("iokit-open", Target::IoKit("IOHIDLibUserClient")),
        "keyboards"
    );
    assert!(!with.allows("mach-lookup", Target::MachService("com.apple.pasteboard.1")));
}

#[test]
fn a_socket_path_past_macos_limit_is_refused_naming_its_length() {
    // Solo's default layout for a user named `alexandra`: 107 bytes.
    let run = "/Users/alexandra/Library/Application Support/Einsora/agent/run/0192f0c4-7b2a-7cde-8f00-000000000001";
    let profile = Profile {
        socket: format!("{run}/jl.sock").into(),
        run: run.into(),
        ..notebook(false, false)
    };
    let err = Profile::new(profile).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{run}/jl.sock: a socket path of 107 bytes, over macOS's limit of 103 (sun_path \
             holds 104 with its NUL); set EINSORA_AGENT_STATE_DIR to a shorter directory"
        )
    );
    let at_the_limit = format!("/{}/jl.sock", "r".repeat(MACOS_SOCKET_PATH_MAX - 9));
    let fits = Profile {
        socket: at_the_limit.clone().into(),
        run: Path::new(&at_the_limit).parent().unwrap().into(),
        ..notebook(false, false)
    };
    assert_eq!(at_the_limit.len(), MACOS_SOCKET_PATH_MAX);
    assert!(Profile::new(fits).is_ok());
}

#[test]
fn a_path_it_cant_name_exactly_is_refused() {
    let with_data = |data: &str| {
        Profile::new(Profile {
            data: data.into(),
            ..notebook(false, false)
        })
    };
    for bad in [
        "relative/data",
        "/Users/ada/../bob/data",
        "/Users/ada/./data",
        "/Users//ada/data",
        "/Users/ada/data/",
    ] {
        assert!(
            matches!(with_data(bad), Err(ProfileError::NotCanonical(_))),
            "{bad}"
        );
    }
    // A quote would end the string and let the rest be rules of the path's own.
    for bad in [
        "/Users/ada/x\") (allow default) (\"",
        "/Users/ada/back\\slash",
        "/Users/ada/new\nline",
    ] {
        assert!(
            matches!(with_data(bad), Err(ProfileError::Unquotable(_))),
            "{bad:?}"
        );
    }
    let elsewhere = Profile {
        socket: "/private/tmp/jl.sock".into(),
        ..notebook(false, false)
    };
    assert!(matches!(
        Profile::new(elsewhere),
        Err(ProfileError::SocketOutsideRun(_))
    ));
}

#[test]
fn the_checker_refuses_what_the_renderer_never_writes() {
    for (text, why) in [
        ("(deny default)", "the first form must be (version 1)"),
        (
            "(version 1)\n(allow file-read*)",
            "no (allow default) or (deny default)",
        ),
        (
            "(version 1)\n(deny default)\n(allow file-read* (regex #\"^/\"))",
            "unknown filter regex",
        ),
        (
            "(version 1)\n(deny default)\n(allow file-read* (subpath \"/a\\\"))",
            "an escape in a string",
        ),
        ("(version 1)\n(deny default", "a ( with no )"),
        ("(version 1))", "a ) with no ("),
        ("(version 1)\n(deny default)\nallow", "outside any form"),
        (
            "(version 1)\n(deny default)\n(permit file-read*)",
            "a rule starts with allow or deny",
        ),
    ] {
        let err = Rules::parse(text).unwrap_err().to_string();
        assert!(err.contains(why), "{text:?}: {err}");
    }
}

#[test]
fn the_last_matching_rule_decides() {
    let rules = Rules::parse(
        "(version 1)\n(deny default)\n(allow file-read* (subpath \"/a\"))\n\
         (deny file-read-data (literal \"/a/secret\"))",
    )
    .unwrap();
    assert!(rules.allows("file-read-data", path("/a/notes")));
    assert!(rules.allows("file-read-metadata", path("/a/secret")));
    assert!(!rules.allows("file-read-data", path("/a/secret")));
    assert!(
        !rules.allows("file-read-data", path("/ab")),
        "a subpath is whole components"
    );
}
