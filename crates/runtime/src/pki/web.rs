//! The access proxy's HTTPS certificate when the installation issues it
//! (`EINSORA_ACCESS_TLS=issued`, ADR 0015): from a web CA of its own (`web-ca.pem`,
//! `web-ca.key`), never the installation CA, and name-constrained to the access URL's host and
//! the notebooks' domain, so the root people install in their browsers vouches for the Lab's
//! names and nothing else. The certificate (`access-web.pem`, `access-web.key`) names the host
//! and `*.<domain>`. Both are kept, and made again when the names change; the certificate is
//! renewed 30 days before it expires, as the roles' are.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{CidrSubnet, GeneralSubtree, NameConstraints, SanType};
use x509_parser::extensions::GeneralName;

use super::dir::{lock, read_optional, write_private};
use super::{Ca, IssuedCert, Pki, PkiError, Validity, cert_der_from_pem};

const WEB_CA_NAME: &str = "Einsora web CA";
const CERT_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the access proxy answers to: its public host, and the domain notebooks sit under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebNames {
    host: Host,
    domain: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Dns(String),
    Ip(IpAddr),
}

impl WebNames {
    /// `host` as a URL writes it (an IPv6 address in brackets); `domain` already validated.
    pub fn new(host: &str, domain: &str) -> WebNames {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let host = match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Dns(host.to_owned()),
        };
        WebNames {
            host,
            domain: domain.to_owned(),
        }
    }

    fn sans(&self) -> Result<Vec<SanType>, PkiError> {
        let mut sans = vec![SanType::DnsName(format!("*.{}", self.domain).try_into()?)];
        sans.push(match &self.host {
            Host::Dns(name) => SanType::DnsName(name.clone().try_into()?),
            Host::Ip(ip) => SanType::IpAddress(*ip),
        });
        Ok(sans)
    }

    fn constraints(&self) -> NameConstraints {
        let mut permitted = vec![GeneralSubtree::DnsName(self.domain.clone())];
        permitted.push(match &self.host {
            Host::Dns(name) => GeneralSubtree::DnsName(name.clone()),
            Host::Ip(ip) => {
                GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(*ip, full_prefix(*ip)))
            }
        });
        NameConstraints {
            permitted_subtrees: permitted,
            excluded_subtrees: Vec::new(),
        }
    }

    /// The names as a certificate's SANs read back: `dns:` and `ip:` entries.
    fn san_set(&self) -> BTreeSet<String> {
        let mut set = BTreeSet::from([format!("dns:*.{}", self.domain)]);
        set.insert(match &self.host {
            Host::Dns(name) => format!("dns:{name}"),
            Host::Ip(ip) => format!("ip:{}", hex(&ip_bytes(*ip))),
        });
        set
    }

    /// The names as a CA's permitted subtrees read back.
    fn subtree_set(&self) -> BTreeSet<String> {
        let mut set = BTreeSet::from([format!("dns:{}", self.domain)]);
        set.insert(match &self.host {
            Host::Dns(name) => format!("dns:{name}"),
            Host::Ip(ip) => {
                let mut bytes = ip_bytes(*ip);
                bytes.extend(std::iter::repeat_n(0xff, bytes.len()));
                format!("ip:{}", hex(&bytes))
            }
        });
        set
    }
}

impl Pki {
    /// The access proxy's certificate for `names`, and the web CA's certificate (the root to
    /// install). Issued, and the web CA made, when missing or made for other names.
    pub fn access_web_cert(&self, names: &WebNames) -> Result<(IssuedCert, String), PkiError> {
        let _lock = lock(self.dir())?;
        let ca = web_ca(self.dir(), names)?;
        let (cert_path, key_path) = access_web_paths(self.dir());
        if let (Some(cert_pem), Some(key_pem)) =
            (read_optional(&cert_path)?, read_optional(&key_path)?)
        {
            let kept = IssuedCert { cert_pem, key_pem };
            if still_good(&kept, &ca, names) {
                return Ok((kept, ca.cert_pem().to_owned()));
            }
        }
        let issued = ca.issue_server(names.sans()?, Validity::from_now(CERT_LIFETIME))?;
        write_private(&key_path, &issued.key_pem)?;
        write_private(&cert_path, &issued.cert_pem)?;
        Ok((issued, ca.cert_pem().to_owned()))
    }
}

/// `access-web.pem` and `access-web.key` in a PKI directory.
pub fn access_web_paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("access-web.pem"), dir.join("access-web.key"))
}

/// The kept web CA if it is constrained to exactly these names, else a new one.
fn web_ca(dir: &Path, names: &WebNames) -> Result<Ca, PkiError> {
    let (cert_path, key_path) = (dir.join("web-ca.pem"), dir.join("web-ca.key"));
    if let (Some(cert_pem), Some(key_pem)) = (read_optional(&cert_path)?, read_optional(&key_path)?)
        && permitted(&cert_pem).as_ref() == Some(&names.subtree_set())
        && let Ok(ca) = Ca::from_pem(&cert_pem, &key_pem)
    {
        return Ok(ca);
    }
    let ca = Ca::generate_constrained(WEB_CA_NAME, names.constraints())?;
    write_private(&key_path, &ca.key_pem())?;
    write_private(&cert_path, ca.cert_pem())?;
    Ok(ca)
}

fn permitted(ca_pem: &str) -> Option<BTreeSet<String>> {
    let der = cert_der_from_pem(ca_pem).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let constraints = cert.name_constraints().ok()??;
    let subtrees = constraints.value.permitted_subtrees.as_ref()?;
    subtrees.iter().map(|s| general_name(&s.base)).collect()
}

fn still_good(kept: &IssuedCert, ca: &Ca, names: &WebNames) -> bool {
    super::dir::still_good(kept, ca, |_, cert| {
        let sans: Option<BTreeSet<String>> = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .and_then(|ext| ext.value.general_names.iter().map(general_name).collect());
        sans == Some(names.san_set())
    })
}

fn general_name(name: &GeneralName<'_>) -> Option<String> {
    match name {
        GeneralName::DNSName(dns) => Some(format!("dns:{dns}")),
        GeneralName::IPAddress(bytes) => Some(format!("ip:{}", hex(bytes))),
        _ => None,
    }
}

fn full_prefix(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pki() -> (tempfile::TempDir, Pki) {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(dir.path()).unwrap();
        (dir, pki)
    }

    #[test]
    fn the_certificate_is_kept_until_the_names_change_and_the_web_ca_with_it() {
        let (_dir, pki) = pki();
        let lab = WebNames::new("lab.example.org", "nb.lab.example.org");
        let (first, root) = pki.access_web_cert(&lab).unwrap();
        assert_ne!(root, pki.ca().cert_pem(), "never the installation CA");
        assert_eq!(
            pki.access_web_cert(&lab).unwrap(),
            (first.clone(), root.clone())
        );
        let moved = WebNames::new("[fd00::7]", "nb.lab.example.org");
        let (second, new_root) = pki.access_web_cert(&moved).unwrap();
        assert_ne!(second, first);
        assert_ne!(
            new_root, root,
            "a root constrained to the old names can't vouch for these"
        );
        assert_eq!(permitted(&new_root), Some(moved.subtree_set()));
    }

    #[test]
    fn a_damaged_kept_certificate_is_issued_again() {
        let (dir, pki) = pki();
        let lab = WebNames::new("10.0.0.7", "lab.test");
        let (first, root) = pki.access_web_cert(&lab).unwrap();
        let (cert, _) = access_web_paths(dir.path());
        std::fs::write(&cert, "not a certificate").unwrap();
        let (again, same_root) = pki.access_web_cert(&lab).unwrap();
        assert_eq!(same_root, root);
        assert_ne!(again.cert_pem, first.cert_pem);
    }
}
