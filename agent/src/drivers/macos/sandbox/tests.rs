use std::os::unix::fs::PermissionsExt;

use super::*;

fn places(root: &Path) -> Places {
    Places {
        run: root.join("r/abc"),
        ..Places::of(&root.join("state"), "w1")
    }
}

fn sandbox(root: &Path, outbound: bool) -> MacSandbox {
    let places = places(root);
    let serves = Serves::Notebook {
        data: places.data.clone(),
    };
    let env = root.join("state/macos/envs/jupyterlab");
    let interpreter = Interpreter {
        python: env.join("bin/python3"),
        binds: vec![(env.clone(), env), ("/usr".into(), "/usr".into())],
    };
    MacSandbox::new(&Request {
        sandbox_exec: Path::new("/usr/bin/sandbox-exec"),
        places: &places,
        serves: &serves,
        cpus: 2,
        interpreter: &interpreter,
        launchers: &root.join("state/macos/launchers"),
        launcher: "start.py",
        profiles: &root.join("state/macos/profiles"),
        workload: "w1",
        gpu: true,
        outbound,
        links: &[],
    })
    .unwrap()
}

#[test]
fn it_runs_its_environment_under_its_profile_with_its_places_and_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = sandbox(dir.path(), false);
    let command = s.command();
    assert_eq!(command.program, Path::new("/usr/bin/sandbox-exec"));
    let profile = dir.path().join("state/macos/profiles/w1.sb");
    let env_python = dir.path().join("state/macos/envs/jupyterlab/bin/python3");
    let launcher = dir.path().join("state/macos/launchers/start.py");
    let expected: Vec<String> = [
        "-f".into(),
        profile.display().to_string(),
        env_python.display().to_string(),
        launcher.display().to_string(),
    ]
    .to_vec();
    assert_eq!(command.args, expected);
    let env: std::collections::HashMap<_, _> = command.env.iter().cloned().collect();
    let places = places(dir.path());
    assert_eq!(env["EINSORA_RUN_DIR"], places.run.display().to_string());
    assert_eq!(env["JUPYTER_RUNTIME_DIR"], places.run.display().to_string());
    assert_eq!(
        env["EINSORA_NOTEBOOK_DIR"],
        places.data.display().to_string()
    );
    assert_eq!(env["TMPDIR"], places.home.display().to_string());
    assert_eq!(
        env["EINSORA_TOKEN_FILE"],
        places.secret.join("token").display().to_string()
    );
    assert_eq!(command.cwd, places.data);
    s.write_profile().unwrap();
    let written = std::fs::read_to_string(&profile).unwrap();
    assert_eq!(written, s.profile.render());
    let mode = std::fs::metadata(&profile).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_different_profile_is_a_different_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let closed = sandbox(dir.path(), false);
    assert_eq!(
        closed.fingerprint(),
        sandbox(dir.path(), false).fingerprint()
    );
    assert_ne!(
        closed.fingerprint(),
        sandbox(dir.path(), true).fingerprint()
    );
}

#[test]
fn its_run_root_must_be_the_agents_own_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("einsora-501");
    run_root(&root).unwrap();
    run_root(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = run_root(&root).unwrap_err().to_string();
    assert!(err.contains("only it can write"), "{err}");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    assert!(run_root(&link).is_err());
}
