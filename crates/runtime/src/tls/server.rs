//! The server side: configs that check the client's role, and a TLS incoming for tonic.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;

use super::{ALPN_H2, TlsError, chain_and_key, provider, refuse, roots};
use crate::pki::{IssuedCert, Role, RoleKind, role_of};

pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Mutual TLS: the client must chain to the CA (`ca_pem`), be within its validity, and hold a
/// role in `allowed`; anything else fails the handshake. The server presents `own`.
pub fn server_config(
    ca_pem: &str,
    own: &IssuedCert,
    allowed: &[RoleKind],
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider()).build()?;
    let verifier = RoleVerifier {
        chain,
        allowed: allowed.to_vec(),
    };
    let (certs, key) = chain_and_key(own)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// The agents' port. The server presents its certificate and then the installation CA's, so an
/// agent enrolling, which knows only the CA's fingerprint, can pin it (`ClientTls::pinned`). A
/// client certificate is optional (an enrolling agent has none yet; the Sync handler requires
/// one) and, when presented, must chain to the agents CA, never the installation CA, and name
/// an agent (ADR 0006).
pub fn server_config_for_agents(
    ca_pem: &str,
    own: &IssuedCert,
    agents_ca_pem: &str,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = WebPkiClientVerifier::builder_with_provider(roots(agents_ca_pem)?, provider())
        .allow_unauthenticated()
        .build()?;
    let verifier = RoleVerifier {
        chain,
        allowed: vec![RoleKind::Agent],
    };
    let (mut certs, key) = chain_and_key(own)?;
    certs.push(crate::pki::cert_der_from_pem(ca_pem)?);
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// Accepts on `listener` and yields completed TLS connections, for
/// `Server::builder()…serve_with_incoming_shutdown`. Handshakes run concurrently, so a slow
/// client delays nobody; a failed one is logged at debug and skipped. Accepting stops when the
/// stream is dropped. Must be called inside a Tokio runtime.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
) -> impl Stream<Item = std::io::Result<TlsStream<TcpStream>>> + Send + 'static {
    let (tx, rx) = mpsc::channel(32);
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                () = tx.closed() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Usually out of file descriptors: wait rather than spin.
                        tracing::warn!(%err, "accepting a connection failed");
                        tokio::time::sleep(ACCEPT_RETRY).await;
                        continue;
                    }
                },
            };
            tokio::spawn(handshake(acceptor.clone(), tcp, peer, tx.clone()));
        }
    });
    ReceiverStream::new(rx)
}

async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    tx: mpsc::Sender<std::io::Result<TlsStream<TcpStream>>>,
) {
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::debug!(%peer, %err, "cannot set TCP_NODELAY");
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => {
            // An error here means the server has stopped; the connection just closes.
            let _ = tx.send(Ok(tls)).await;
        }
        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// The verified role of the client that sent `request`, on a server fed by [`incoming`].
pub fn peer_role<T>(request: &tonic::Request<T>) -> Option<Role> {
    let certs = request.peer_certs()?;
    role_of(certs.first()?).ok()
}

#[derive(Debug)]
struct RoleVerifier {
    chain: Arc<dyn ClientCertVerifier>,
    allowed: Vec<RoleKind>,
}

impl ClientCertVerifier for RoleVerifier {
    fn offer_client_auth(&self) -> bool {
        self.chain.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.chain.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .chain
            .verify_client_cert(end_entity, intermediates, now)?;
        let role = role_of(end_entity).map_err(|err| refuse(err.to_string()))?;
        if !self.allowed.contains(&role.kind()) {
            return Err(refuse(format!("a {role} certificate is not admitted here")));
        }
        Ok(verified)
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
