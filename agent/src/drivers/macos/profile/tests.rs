use std::path::{Path, PathBuf};

use super::check::{Addr, Host, Rules, Target};
use super::*;

const RUN: &str = "/private/tmp/einsora-501/run/0192f0c4";
const TMP: &str = "/private/tmp/einsora-501/tmp/0192f0c4";
const TOKEN: &str = "/private/tmp/einsora-501/secrets/0192f0c4";
const DATA: &str = "/Users/ada/Library/Application Support/Einsora/agent/data/0192f0c4";
const ENV: &str = "/Users/ada/Library/Application Support/Einsora/envs/jupyterlab-3f2a";

fn places(gpu: bool, outbound: bool) -> Places {
    Places {
        data: DATA.into(),
        run: RUN.into(),
        tmp: TMP.into(),
        programs: vec![ENV.into()],
        read_only: vec![TOKEN.into()],
        read_dirs: Vec::new(),
        socket: format!("{RUN}/jl.sock").into(),
        gpu,
        outbound,
    }
}

fn notebook(gpu: bool, outbound: bool) -> Profile {
    Profile::new(places(gpu, outbound)).unwrap()
}

fn rules(profile: &Profile) -> Rules {
    Rules::parse(&profile.render()).unwrap()
}

fn path(p: &str) -> Target<'_> {
    Target::Path(Path::new(p))
}

/// The profiles are committed (`profile/*.sb`), so a change to them is one a reviewer reads
/// rule by rule. After changing the renderer:
/// `EINSORA_UPDATE_PROFILES=1 cargo test -p einsora-agent macos::profile`, and commit them.
#[test]
#[allow(clippy::disallowed_methods)] // the test's own switch
fn the_profiles_are_the_committed_ones() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/drivers/macos/profile");
    for (name, profile) in [
        ("notebook.sb", notebook(true, true)),
        ("cpu-notebook.sb", notebook(false, false)),
    ] {
        let rendered = profile.render();
        let committed = format!("{dir}/{name}");
        if std::env::var_os("EINSORA_UPDATE_PROFILES").is_some() {
            std::fs::write(&committed, &rendered).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&committed).unwrap_or_default(),
            rendered,
            "{name}: regenerate with EINSORA_UPDATE_PROFILES=1 cargo test -p einsora-agent \
             macos::profile"
        );
    }
}

#[test]
fn every_rule_says_what_it_is_for_and_names_what_it_allows() {
    // Unfiltered on purpose: forking, metadata, IPC names, the GPU's properties.
    let unfiltered = [
        "(allow process-fork)",
        "(allow file-read-metadata)",
        "(allow ipc-posix-shm ipc-posix-sem)",
        "(allow iokit-get-properties)",
    ];
    for places in [
        places(true, true),
        Places {
            read_only: vec![],
            ..places(false, false)
        },
    ] {
        let rendered = Profile::new(places).unwrap().render();
        for block in rendered.split("\n\n").skip(1) {
            assert!(
                block.starts_with("; "),
                "a rule without its reason:\n{block}"
            );
            for rule in block.lines().filter(|l| l.starts_with("(allow")) {
                assert!(
                    rule.contains(" (") || unfiltered.contains(&rule),
                    "an allow that names nothing it allows: {rule}"
                );
            }
        }
    }
}

#[test]
fn no_ip_listener_explicit_or_implicit_and_no_inbound_connection() {
    for outbound in [false, true] {
        let rules = rules(&notebook(true, outbound));
        for local in [
            Addr::Tcp(Host::Elsewhere, 8888),
            Addr::Tcp(Host::Localhost, 0),
            Addr::Udp(Host::Elsewhere, 5353),
            Addr::Udp(Host::Localhost, 0),
        ] {
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
        for remote in [
            Addr::Udp(Host::Elsewhere, 53),
            Addr::Udp(Host::Localhost, 443),
        ] {
            assert!(
                !rules.allows("network-outbound", Target::Remote(remote)),
                "{remote:?}"
            );
        }
        let out = Addr::Tcp(Host::Elsewhere, 443);
        assert_eq!(
            rules.allows("network-outbound", Target::Remote(out)),
            outbound,
            "TCP out only with the owner's egress"
        );
        assert_eq!(
            rules.allows("system-socket", Target::SocketDomain("AF_INET")),
            outbound
        );
        // Never to this Mac's loopback: the control plane, the agents' port.
        let control_plane = Addr::Tcp(Host::Localhost, 8080);
        assert!(!rules.allows("network-outbound", Target::Remote(control_plane)));
    }
}

#[test]
fn its_listeners_are_unix_sockets_in_its_run_directory() {
    let rules = rules(&notebook(false, false));
    assert!(rules.allows("system-socket", Target::SocketDomain("AF_UNIX")));
    let socket = PathBuf::from(format!("{RUN}/jl.sock"));
    let kernel = PathBuf::from(format!("{RUN}/kernel-1.ipc"));
    for ok in [&socket, &kernel] {
        assert!(rules.allows("network-bind", Target::Local(Addr::Unix(ok))));
        assert!(rules.allows("network-inbound", Target::Local(Addr::Unix(ok))));
    }
    assert!(rules.allows("network-outbound", Target::Remote(Addr::Unix(&kernel))));
    let elsewhere = Path::new("/private/tmp/einsora-501/run/0192f0c5/jl.sock");
    assert!(!rules.allows("network-bind", Target::Local(Addr::Unix(elsewhere))));
    assert!(!rules.allows("network-outbound", Target::Remote(Addr::Unix(elsewhere))));
    let resolver = Path::new("/private/var/run/mDNSResponder");
    assert!(rules.allows("network-outbound", Target::Remote(Addr::Unix(resolver))));
    let docker = Path::new("/Users/ada/.docker/run/docker.sock");
    assert!(!rules.allows("network-outbound", Target::Remote(Addr::Unix(docker))));
}

#[test]
fn it_writes_only_its_own_directories_and_reads_none_of_the_owners() {
    for places in [
        places(true, true),
        Places {
            read_only: vec![],
            ..places(false, false)
        },
    ] {
        let has_token = !places.read_only.is_empty();
        let rules = rules(&Profile::new(places).unwrap());
        for (op, mine) in [
            ("file-write-create", format!("{DATA}/analysis.ipynb")),
            ("file-write-data", format!("{DATA}/nested/data.csv")),
            ("file-write-unlink", format!("{RUN}/jl.sock")),
            ("file-write-create", format!("{TMP}/scratch")),
            ("file-read-data", format!("{DATA}/analysis.ipynb")),
            ("file-read-data", format!("{ENV}/bin/python3")),
            (
                "file-read-data",
                "/System/Library/Frameworks/Metal.framework/Metal".into(),
            ),
            ("file-read-data", "/dev/urandom".into()),
            (
                "file-map-executable",
                format!("{ENV}/lib/python3.12/lib-dynload/_ssl.so"),
            ),
            ("file-map-executable", "/usr/lib/libSystem.B.dylib".into()),
        ] {
            assert!(rules.allows(op, path(&mine)), "{op} {mine}");
        }
        assert_eq!(rules.allows("file-read-data", path(TOKEN)), has_token);
        let their_data = "/Users/ada/Library/Application Support/Einsora/agent/data/0192f0c5/x";
        let env_python = format!("{ENV}/bin/python3");
        let downloaded = format!("{DATA}/evil.dylib");
        for (op, theirs) in [
            ("file-write-data", "/Users/ada/Documents/thesis.tex"),
            (
                "file-write-create",
                "/Users/ada/Library/LaunchAgents/evil.plist",
            ),
            ("file-write-create", their_data),
            (
                "file-write-data",
                "/Users/ada/Library/Application Support/Einsora/einsora.db",
            ),
            ("file-write-data", TOKEN),
            ("file-write-data", &env_python),
            ("file-read-data", "/Users/ada/.ssh/id_ed25519"),
            ("file-read-data", their_data),
            (
                "file-read-data",
                "/Users/ada/Library/Application Support/Einsora/agent/key.pem",
            ),
            (
                "file-read-data",
                "/private/tmp/einsora-501/run/0192f0c5/jl.sock",
            ),
            // The Data volume under its firmlinks: every user's files again.
            (
                "file-read-data",
                "/System/Volumes/Data/Users/ada/.ssh/id_ed25519",
            ),
            // Terminals: a password typed in the owner's shell.
            ("file-read-data", "/dev/ttys000"),
            ("file-read-data", "/dev/console"),
            ("file-map-executable", &downloaded),
        ] {
            assert!(!rules.allows(op, path(theirs)), "{op} {theirs}");
        }
    }
}

#[test]
fn only_its_environment_and_a_shell_run_and_it_sees_only_its_own() {
    let rules = rules(&notebook(true, true));
    assert!(rules.allows("process-exec", path(&format!("{ENV}/bin/python3"))));
    assert!(rules.allows("process-exec", path("/bin/sh")));
    assert!(rules.allows("process-fork", Target::Nothing));
    for not_its in [
        format!("{DATA}/miner"),
        format!("{TMP}/a.out"),
        "/usr/bin/osascript".into(),
        "/usr/bin/security".into(),
    ] {
        assert!(!rules.allows("process-exec", path(&not_its)), "{not_its}");
    }
    let same = Target::Process { same_sandbox: true };
    let other = Target::Process {
        same_sandbox: false,
    };
    for op in ["signal", "process-info-pidinfo"] {
        assert!(rules.allows(op, same), "{op}");
        assert!(!rules.allows(op, other), "{op}");
    }
    assert!(rules.allows("sysctl-read", Target::Sysctl("hw.memsize")));
    assert!(!rules.allows("sysctl-read", Target::Sysctl("kern.procargs2")));
    assert!(rules.allows("ipc-posix-shm-write-create", Target::Nothing));
}

#[test]
fn metal_only_for_the_workload_holding_the_gpu() {
    let with = rules(&notebook(true, false));
    let without = rules(&notebook(false, false));
    for (op, target) in [
        ("iokit-open", Target::IoKit("AGXDeviceUserClient")),
        ("iokit-get-properties", Target::Nothing),
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
    let window_server = Target::MachService("com.apple.CARenderServer");
    assert!(!with.allows("mach-lookup", window_server));
    assert!(!with.allows("mach-lookup", Target::MachService("com.apple.pasteboard.1")));
}

#[test]
fn sockets_past_macos_limit_are_refused_naming_their_length() {
    // Solo's default layout for a user named `ada`: its kernels' sockets wouldn't fit.
    let run = "/Users/ada/Library/Application Support/Einsora/agent/run/0192f0c4-7b2a-7cde-8f00-000000000001";
    let err = Profile::new(Places {
        socket: format!("{run}/jl.sock").into(),
        run: run.into(),
        ..places(false, false)
    })
    .unwrap_err();
    let length = run.len() + 1 + LONGEST_SOCKET_NAME;
    assert_eq!(
        err.to_string(),
        format!(
            "{run}: its sockets' paths reach {length} bytes, over macOS's limit of 103 (sun_path \
             holds 104 with its NUL); set EINSORA_MACOS_RUN_DIR to a shorter directory"
        )
    );
    let longest = MACOS_SOCKET_PATH_MAX - 1 - LONGEST_SOCKET_NAME;
    let at_the_limit = format!("/r/r/{}", "r".repeat(longest - 5));
    assert_eq!(at_the_limit.len(), longest);
    let fits = Places {
        socket: format!("{at_the_limit}/jl.sock").into(),
        run: at_the_limit.clone().into(),
        ..places(false, false)
    };
    assert!(Profile::new(fits.clone()).is_ok());
    let one_more = Places {
        socket: format!("{at_the_limit}r/jl.sock").into(),
        run: format!("{at_the_limit}r").into(),
        ..fits
    };
    assert!(matches!(
        Profile::new(one_more),
        Err(ProfileError::SocketPathTooLong { .. })
    ));
}

#[test]
fn places_it_cant_name_exactly_or_that_give_too_much_are_refused() {
    let with_data = |data: &str| {
        Profile::new(Places {
            data: data.into(),
            ..places(false, false)
        })
    };
    for bad in [
        "relative/data",
        "/Users/ada/../bob/data",
        "/Users/ada/./data",
        "/Users//ada/data",
        "/Users/ada/data/",
        "/",
        // The sandbox sees resolved paths: /tmp is /private/tmp.
        "/tmp/einsora/data",
        "/var/folders/x/data",
    ] {
        assert!(
            matches!(with_data(bad), Err(ProfileError::NotCanonical(_))),
            "{bad}"
        );
    }
    // Where a system has none of macOS's links (the stand-in's Linux), /tmp is a place.
    let on_linux = Places {
        data: "/tmp/einsora/data".into(),
        ..places(false, false)
    };
    assert!(Profile::resolved_through(on_linux.clone(), &[]).is_ok());
    assert!(Profile::new(on_linux).is_err());
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
    for wide in ["/Users", "/Users/ada"] {
        assert!(
            matches!(with_data(wide), Err(ProfileError::TooWide(_))),
            "{wide}"
        );
    }
    // An environment inside a directory it writes would run what it wrote there.
    let inside = Places {
        programs: vec![format!("{DATA}/env").into()],
        ..places(false, false)
    };
    assert!(matches!(
        Profile::new(inside),
        Err(ProfileError::WritableProgram(_))
    ));
    let around = Places {
        programs: vec!["/Users/ada/Library/Application Support/Einsora".into()],
        ..places(false, false)
    };
    assert!(matches!(
        Profile::new(around),
        Err(ProfileError::WritableProgram(_))
    ));
    let elsewhere = Places {
        socket: "/private/tmp/einsora-501/jl.sock".into(),
        ..places(false, false)
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
        // Anywhere but first, it would match everything and decide last.
        (
            "(version 1)\n(deny default)\n(allow file-read-data)\n(allow default)",
            "only as the first rule",
        ),
        (
            "(version 1)\n(deny default)\n(allow file-reed*)",
            "unknown operation file-reed*",
        ),
        (
            "(version 1)\n(deny default)\n(allow network-outbound (remote tcp \"10.0.0.1:80\"))",
            "a host is * or localhost",
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
