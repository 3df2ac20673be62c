use super::*;

fn settings(vars: &[(&str, &str)]) -> Settings {
    Settings::from_map(vars.iter().copied())
}

#[test]
fn socket_addr_error_names_the_setting_and_the_value() {
    let s = settings(&[("EINSORA_HTTP_ADDR", "abc")]);
    let err = s
        .socket_addr("EINSORA_HTTP_ADDR", "127.0.0.1:8080")
        .unwrap_err();
    assert_eq!(err.setting(), "EINSORA_HTTP_ADDR");
    assert!(
        err.to_string()
            .starts_with(r#"EINSORA_HTTP_ADDR: "abc" is not a socket address"#),
        "{err}"
    );
}

#[test]
fn unset_and_empty_settings_take_the_default() {
    let s = settings(&[("EINSORA_AGENT_ADDR", "")]);
    let addr = s
        .socket_addr("EINSORA_AGENT_ADDR", "127.0.0.1:8443")
        .unwrap();
    assert_eq!(addr, "127.0.0.1:8443".parse().unwrap());
    let addr = s
        .socket_addr("EINSORA_HTTP_ADDR", "127.0.0.1:8080")
        .unwrap();
    assert_eq!(addr.port(), 8080);
}

#[test]
fn a_bad_default_is_reported_like_a_bad_value() {
    let err = Settings::default()
        .duration("EINSORA_X", "soon")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"EINSORA_X: "soon" is not a duration (e.g. 30s, 500ms, 2m, 1h30m)"#
    );
}

#[test]
fn durations_accept_units_and_compounds() {
    let cases = [
        ("30s", Duration::from_secs(30)),
        ("500ms", Duration::from_millis(500)),
        ("2m", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("1m30s", Duration::from_secs(90)),
    ];
    for (text, want) in cases {
        let s = settings(&[("EINSORA_CONTROLLER_INTERVAL", text)]);
        assert_eq!(
            s.duration("EINSORA_CONTROLLER_INTERVAL", "2s").unwrap(),
            want,
            "{text}"
        );
    }
}

#[test]
fn durations_refuse_bare_numbers_unknown_units_and_junk() {
    for text in [
        "30",
        "5d",
        "s",
        "1.5s",
        "-1s",
        "1 s",
        "99999999999999999999h",
    ] {
        let s = settings(&[("EINSORA_CONTROLLER_INTERVAL", text)]);
        let err = s.duration("EINSORA_CONTROLLER_INTERVAL", "2s").unwrap_err();
        assert_eq!(err.setting(), "EINSORA_CONTROLLER_INTERVAL", "{text}");
        assert!(
            err.to_string().contains("is not a duration"),
            "{text}: {err}"
        );
    }
}

#[test]
fn choice_lists_the_allowed_words() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Mode {
        Local,
        Dev,
    }
    let choices = [("local", Mode::Local), ("dev", Mode::Dev)];
    let s = settings(&[("EINSORA_AUTH_MODE", "dev")]);
    assert_eq!(
        s.choice("EINSORA_AUTH_MODE", &choices, "local").unwrap(),
        Mode::Dev
    );
    assert_eq!(
        Settings::default()
            .choice("EINSORA_AUTH_MODE", &choices, "local")
            .unwrap(),
        Mode::Local
    );

    let s = settings(&[("EINSORA_AUTH_MODE", "Dev")]);
    let err = s
        .choice("EINSORA_AUTH_MODE", &choices, "local")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"EINSORA_AUTH_MODE: "Dev" is not one of local, dev"#
    );
}

#[test]
fn urls_need_a_listed_scheme_and_http_needs_a_host() {
    let get = |value: &str| {
        settings(&[("EINSORA_ACCESS_URL", value)]).url(
            "EINSORA_ACCESS_URL",
            &["http", "https"],
            "http://localhost:8090",
        )
    };
    for good in [
        "http://localhost:8090",
        "https://einsora.example",
        "http://[::1]:8090/x",
        "http://u@h:1",
    ] {
        assert_eq!(get(good).unwrap(), good);
    }
    for bad in [
        "localhost:8090",
        "ftp://h",
        "http:",
        "http:h",
        "http://",
        "http://:80",
        "http://h:port",
        "http://h:70000",
        "http://h x",
    ] {
        let err = get(bad).unwrap_err();
        assert_eq!(err.setting(), "EINSORA_ACCESS_URL", "{bad}");
        assert!(err.to_string().contains("is not a URL"), "{bad}: {err}");
    }
}

#[test]
fn a_secret_value_is_never_in_debug_output() {
    let password = "hunter2-very-secret";
    let url = format!("postgres://admin:{password}@db/einsora");
    let s = settings(&[("EINSORA_DATABASE_URL", url.as_str())]);
    let secret = s.secret("EINSORA_DATABASE_URL").unwrap().unwrap();
    assert_eq!(secret.expose(), url);
    assert!(!format!("{secret:?}").contains(password));
    assert!(!format!("{s:?}").contains(password));
    assert!(s.secret("EINSORA_TOKEN").unwrap().is_none());
}

#[test]
fn a_secret_that_is_not_utf8_is_refused_without_echoing_it() {
    use std::os::unix::ffi::OsStringExt;
    let raw = OsString::from_vec(b"tsk_\xffsecret".to_vec());
    let s = Settings::from_map([("EINSORA_TOKEN", raw)]);
    let err = s.secret("EINSORA_TOKEN").unwrap_err();
    assert_eq!(
        err.to_string(),
        "EINSORA_TOKEN: the value is not valid UTF-8"
    );
    assert!(settings(&[]).secret("EINSORA_TOKEN").unwrap().is_none());
}

#[test]
fn paths_are_made_absolute() {
    let s = settings(&[("EINSORA_CATALOG", "my/catalog.yaml")]);
    let path = s.path("EINSORA_CATALOG", Path::new("/unused")).unwrap();
    assert!(path.is_absolute());
    assert!(path.ends_with("my/catalog.yaml"));
    assert_eq!(
        settings(&[])
            .path("EINSORA_CATALOG", Path::new("/etc/c.yaml"))
            .unwrap(),
        Path::new("/etc/c.yaml")
    );
}

#[test]
fn an_optional_path_is_none_when_unset_or_empty() {
    assert_eq!(
        settings(&[]).optional_path("EINSORA_LOG_FILE").unwrap(),
        None
    );
    let empty = settings(&[("EINSORA_LOG_FILE", "")]);
    assert_eq!(empty.optional_path("EINSORA_LOG_FILE").unwrap(), None);
    assert!(!empty.is_set("EINSORA_LOG_FILE"));
    let set = settings(&[("EINSORA_LOG_FILE", "logs/e.log")]);
    let path = set.optional_path("EINSORA_LOG_FILE").unwrap().unwrap();
    assert!(path.is_absolute() && path.ends_with("logs/e.log"));
    assert!(set.is_set("EINSORA_LOG_FILE"));
    let replaced = set.with("EINSORA_LOG_FILE", "/var/log/e.log");
    assert_eq!(
        replaced.optional_path("EINSORA_LOG_FILE").unwrap().unwrap(),
        Path::new("/var/log/e.log")
    );
}

#[test]
fn data_dir_prefers_the_setting_then_home() {
    let s = settings(&[("EINSORA_DATA_DIR", "/srv/einsora"), ("HOME", "/home/ada")]);
    assert_eq!(s.data_dir().unwrap(), Path::new("/srv/einsora"));

    let s = settings(&[("HOME", "/home/ada")]);
    let want = if cfg!(target_os = "macos") {
        "/home/ada/Library/Application Support/Einsora"
    } else {
        "/home/ada/.local/share/einsora"
    };
    assert_eq!(s.data_dir().unwrap(), Path::new(want));

    let err = settings(&[]).data_dir().unwrap_err();
    assert_eq!(err.setting(), "EINSORA_DATA_DIR");
}

#[test]
fn from_env_keeps_only_einsora_settings_and_home() {
    let s = Settings::from_env();
    assert!(
        s.vars
            .keys()
            .all(|k| k.starts_with("EINSORA_") || k == "HOME")
    );
}

#[test]
fn sizes_take_binary_units() {
    let (kib, mib, gib, tib) = (1u64 << 10, 1u64 << 20, 1u64 << 30, 1u64 << 40);
    assert_eq!(parse_size("1048576"), Ok(mib));
    assert_eq!(parse_size("512KiB"), Ok(512 * kib));
    assert_eq!(parse_size("20MiB"), Ok(20 * mib));
    assert_eq!(parse_size("2gib"), Ok(2 * gib));
    assert_eq!(parse_size(" 1 TiB "), Ok(tib));
    for bad in [
        "",
        "GiB",
        "2GB",
        "-1GiB",
        "1.5GiB",
        "2 GiB extra",
        "99999999999TiB",
    ] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
    let err = settings(&[("EINSORA_X", "2GB")])
        .size("EINSORA_X", "1MiB")
        .unwrap_err();
    assert_eq!(err.setting(), "EINSORA_X");
}
