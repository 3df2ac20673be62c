//! The client side: tonic channels over TLS that accept only the expected server role.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::{ALPN_H2, TlsError, chain_and_key, provider, refuse, roots};
use crate::pki::{IssuedCert, Role, role_of};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach one kind of server: trust the CA, expect `server_role`, present `own` if any.
#[derive(Debug, Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl ClientTls {
    /// `own: None` makes a client without a certificate (an agent before enrolment).
    pub fn new(
        ca_pem: &str,
        own: Option<&IssuedCert>,
        server_role: Role,
    ) -> Result<Self, TlsError> {
        let chain =
            WebPkiServerVerifier::builder_with_provider(roots(ca_pem)?, provider()).build()?;
        let verifier = RoleVerifier {
            chain,
            expected: server_role,
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let mut config = match own {
            Some(own) => {
                let (certs, key) = chain_and_key(own)?;
                builder.with_client_auth_cert(certs, key)?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![ALPN_H2.to_vec()];
        // The name checked against the certificate's DNS SANs is the role's, not the address
        // dialled, so a service is reached the same way on loopback or across a Lab.
        let server_name =
            ServerName::try_from(server_role.name()).expect("role names are DNS names");
        Ok(Self {
            config: Arc::new(config),
            server_name,
        })
    }

    /// A client without a certificate that trusts the CA whose certificate's SHA-256 is
    /// `pin` (an agent enrolling, which knows only that) and expects `server_role`.
    pub fn pinned(pin: [u8; 32], server_role: Role) -> Result<Self, TlsError> {
        let verifier = super::pinned::PinnedVerifier {
            pin,
            expected: server_role,
        };
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![ALPN_H2.to_vec()];
        let server_name =
            ServerName::try_from(server_role.name()).expect("role names are DNS names");
        Ok(Self {
            config: Arc::new(config),
            server_name,
        })
    }

    /// Connects to `addr` (`host:port`) now: an unreachable or untrusted server is an error
    /// here. A server refusing this client's certificate shows at the first call instead, since
    /// TLS 1.3 sends that refusal after the client has finished its handshake.
    pub async fn connect(&self, addr: &str) -> Result<Channel, TlsError> {
        self.connect_tuned(addr, |endpoint| endpoint).await
    }

    /// As `connect`, the endpoint tuned first (a test shrinks the window a stalled peer
    /// leaves for its server to fill).
    pub async fn connect_tuned(
        &self,
        addr: &str,
        tune: impl FnOnce(Endpoint) -> Endpoint,
    ) -> Result<Channel, TlsError> {
        let endpoint = tune(endpoint(addr)?);
        Ok(endpoint.connect_with_connector(self.connector()).await?)
    }

    /// A channel that connects to `addr` (`host:port`) on first use and reconnects as needed.
    pub fn connect_lazy(&self, addr: &str) -> Result<Channel, TlsError> {
        self.connect_lazy_tuned(addr, |endpoint| endpoint)
    }

    /// As `connect_lazy`, the endpoint tuned first (the proxy gives up sooner on a controller
    /// that doesn't answer, since another of the region's may).
    pub fn connect_lazy_tuned(
        &self,
        addr: &str,
        tune: impl FnOnce(Endpoint) -> Endpoint,
    ) -> Result<Channel, TlsError> {
        Ok(tune(endpoint(addr)?).connect_with_connector_lazy(self.connector()))
    }

    fn connector(
        &self,
    ) -> impl tower::Service<
        Uri,
        Response = TokioIo<TlsStream<TcpStream>>,
        Error = io::Error,
        Future: Send,
    > + Send
    + 'static {
        let tls = TlsConnector::from(Arc::clone(&self.config));
        let server_name = self.server_name.clone();
        tower::service_fn(move |uri: Uri| {
            let (tls, server_name) = (tls.clone(), server_name.clone());
            async move {
                let host = uri.host().unwrap_or_default();
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let port = uri
                    .port_u16()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no port"))?;
                let tcp = TcpStream::connect((host, port)).await?;
                tcp.set_nodelay(true)?;
                Ok(TokioIo::new(tls.connect(server_name, tcp).await?))
            }
        })
    }
}

// TLS comes from the connector; tonic would refuse an https URI without its own TLS config.
fn endpoint(addr: &str) -> Result<Endpoint, TlsError> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|_| TlsError::Address(addr.to_owned()))?;
    let uri = endpoint.uri();
    if uri.host().is_none() || uri.port_u16().is_none() || uri.path() != "/" {
        return Err(TlsError::Address(addr.to_owned()));
    }
    Ok(endpoint.connect_timeout(CONNECT_TIMEOUT))
}

/// The chain to the CA, then the server's role. `pinned` builds one per handshake.
#[derive(Debug)]
pub(super) struct RoleVerifier {
    pub(super) chain: Arc<WebPkiServerVerifier>,
    pub(super) expected: Role,
}

impl ServerCertVerifier for RoleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.chain.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        match role_of(end_entity) {
            Ok(role) if role == self.expected => Ok(verified),
            Ok(role) => Err(refuse(format!(
                "the server is {role}, not the expected {}",
                self.expected
            ))),
            Err(err) => Err(refuse(err.to_string())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{Ca, Validity, cert_der_from_pem};

    // Every certificate also names `localhost`, so with that name only the role tells a
    // controller from an api server: this proves the role check stands on its own.
    #[test]
    fn the_role_check_refuses_a_valid_chain_with_another_role() {
        let ca = Ca::generate("test").unwrap();
        let chain =
            WebPkiServerVerifier::builder_with_provider(roots(ca.cert_pem()).unwrap(), provider());
        let verifier = RoleVerifier {
            chain: chain.build().unwrap(),
            expected: Role::Controller,
        };
        let localhost = ServerName::try_from("localhost").unwrap();
        let verify = |role| {
            let issued = ca
                .issue(role, Validity::from_now(Duration::from_secs(3600)))
                .unwrap();
            let der = cert_der_from_pem(&issued.cert_pem).unwrap();
            verifier.verify_server_cert(&der, &[], &localhost, &[], UnixTime::now())
        };
        assert!(verify(Role::Controller).is_ok());
        let err = verify(Role::Api).unwrap_err();
        assert!(
            err.to_string().contains("not the expected controller"),
            "{err}"
        );
    }

    #[test]
    fn addresses_must_be_host_and_port() {
        assert!(endpoint("127.0.0.1:8443").is_ok());
        assert!(endpoint("[::1]:8443").is_ok());
        for bad in ["127.0.0.1", "h:1/x", "", "a b:1"] {
            assert!(matches!(endpoint(bad), Err(TlsError::Address(_))), "{bad}");
        }
    }
}
