//! `einsora up` for browsers on other computers: the access proxy on HTTPS with a certificate
//! `up` issued from the installation's web CA, notebooks under the Lab's domain. A client that
//! installed that root (and only it) reaches a notebook's host and gets the proxy's answer;
//! links name the domain; plain HTTP and names the certificate doesn't hold get nothing. A Lab's
//! init step (`einsora pki init`) issues the same certificate, once.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::harness::https;
use crate::harness::solo::{Engine, Solo};
use crate::harness::support::{Einsora, stderr};
use crate::harness::workloads::{create, wait_for};
use crate::harness::world::{call, tenant};

#[test]
fn up_serves_the_access_proxy_on_https_under_the_labs_domain() {
    let env = [
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_AGENT_SIM", "true"),
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
        ("EINSORA_ACCESS_URL", "https://lab.test"),
        ("EINSORA_ACCESS_DOMAIN", "lab.test"),
        ("EINSORA_ACCESS_TLS", "issued"),
    ];
    let solo = Solo::launch(Einsora::new(), Engine::Sqlite, &env);
    let pki = solo.e.dir().join("pki");
    let root_file = pki.join("web-ca.pem");
    let root = std::fs::read_to_string(&root_file).unwrap();
    for kept in ["web-ca.key", "access-web.pem", "access-web.key"] {
        let mode = std::fs::metadata(pki.join(kept))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{kept}");
    }
    assert!(
        solo.logs().contains(root_file.to_str().unwrap()),
        "up says where the root is"
    );

    let acme = tenant(&solo, "dev@acme");
    let (status, made) = create(&solo, &acme.session, "nb", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap();
    wait_for(&solo, &acme.session, id, "running");
    let path = format!("/v1/workloads/{id}/access");
    let grant = call(&solo, &acme.session, "POST", &path, Some(json!({})));
    assert_eq!(grant.status, 200, "{}", grant.body);
    let link = grant.json()["notebook"]["link"]
        .as_str()
        .unwrap()
        .to_owned();
    let host = format!("w-{id}.lab.test");
    let target = link
        .strip_prefix(&format!("https://{host}"))
        .unwrap_or_else(|| panic!("the link is the notebook's HTTPS origin: {link}"));

    // The ticket reaches the proxy over TLS and is redeemed: the sim driver's notebook has no
    // server behind it, so the proxy says to try again shortly, the answer of the notebook's
    // own host.
    let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let opened = https::exchange(&solo.access, &root, &host, &request).unwrap();
    assert_eq!(opened.status, 503, "{opened:?}");
    assert!(opened.body.contains("try again shortly"), "{}", opened.body);
    // A host under the domain that is no notebook's: nothing is served there.
    let stray = request.replace(&format!("Host: {host}"), "Host: x.lab.test");
    let stray = https::exchange(&solo.access, &root, "x.lab.test", &stray).unwrap();
    assert!(
        stray.body.contains("nothing is served at this host"),
        "{}",
        stray.body
    );

    // Names the certificate doesn't hold, and plain HTTP, get nothing.
    let elsewhere = https::exchange(&solo.access, &root, &format!("w-{id}.localhost"), &request);
    assert!(elsewhere.unwrap_err().contains("not valid for name"));
    let plain = einsora_testkit::http::try_exchange(&solo.access, &request);
    assert!(plain.is_none(), "{plain:?}");
}

/// compose's init step: `einsora pki init` issues the proxy's certificate beside the roles', says
/// where the root to install is, and keeps both when run again; TLS asked of an `http` URL is
/// refused, naming the setting.
#[test]
fn pki_init_issues_the_access_certificate_once_and_names_the_root() {
    let e = Einsora::new();
    let env = [
        ("EINSORA_ACCESS_URL", "https://lab.test:8090"),
        ("EINSORA_ACCESS_DOMAIN", "lab.test"),
        ("EINSORA_ACCESS_TLS", "issued"),
    ];
    let first = e.run(&["pki", "init"], &env);
    assert!(first.status.success(), "{}", stderr(&first));
    let pki = e.dir().join("pki");
    let root = pki.join("web-ca.pem");
    assert!(
        stderr(&first).contains(root.to_str().unwrap()),
        "{}",
        stderr(&first)
    );
    let read = |name: &str| std::fs::read_to_string(pki.join(name)).unwrap();
    let (cert, ca) = (read("access-web.pem"), read("web-ca.pem"));
    let again = e.run(&["pki", "init"], &env);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        (read("access-web.pem"), read("web-ca.pem")),
        (cert, ca),
        "both kept"
    );

    let plain = [
        ("EINSORA_ACCESS_URL", "http://lab.test:8090"),
        ("EINSORA_ACCESS_TLS", "issued"),
    ];
    let refused = e.run(&["pki", "init"], &plain);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("EINSORA_ACCESS_TLS"),
        "{}",
        stderr(&refused)
    );
}
