//! One live stream per machine identity, and renewals retiring the previous certificate.

use std::time::Duration;

use einsora_proto::agent::v1 as pb;
use einsora_runtime::pki::IssuedCert;
use tonic::Code;

use super::harness::{PATIENCE, Port, Stream};

const TOKEN: &str = "enr_0123456789abcdefghijklmnopqrstuv";
/// Long enough that a stream about to be closed would have been.
const QUIET: Duration = Duration::from_millis(500);

async fn closed(stream: &mut Stream) -> tonic::Status {
    loop {
        match stream.next().await {
            Ok(_) => continue,
            Err(status) => return status,
        }
    }
}

#[tokio::test]
async fn a_second_stream_of_a_machine_replaces_the_first_which_is_closed() {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    port.tenancy.token("enr_another").await;
    let (_, cert) = port.enrol(TOKEN).await.unwrap();
    let (_, neighbour) = port.enrol("enr_another").await.unwrap();
    let mut first = port.sync(&cert).await.unwrap();
    let mut other = port.sync(&neighbour).await.unwrap();

    let mut second = port
        .sync(&cert)
        .await
        .expect("the newer stream is accepted");
    let ended = closed(&mut first).await;
    assert_eq!(ended.code(), Code::Aborted, "{ended:?}");
    assert!(ended.message().contains("replaced"), "{}", ended.message());
    assert!(
        second.stays_open(QUIET).await,
        "the newer stream speaks for the machine"
    );
    assert!(
        other.stays_open(QUIET).await,
        "another machine's stream is left alone"
    );
}

/// The renewed certificate of a renewal over `stream`, with its new key.
async fn renew(stream: &mut Stream) -> IssuedCert {
    let (csr_pem, key) = einsora_runtime::pki::csr().unwrap();
    stream
        .send(pb::agent_report::Report::RenewCertificate(
            pb::CertificateRenewal { csr_pem },
        ))
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let state = stream.next().await.expect("the stream stays open");
        if let Some(renewed) = state.renewed_certificate {
            return IssuedCert {
                cert_pem: renewed.certificate_chain_pem,
                key_pem: key.serialize_pem(),
            };
        }
        assert!(tokio::time::Instant::now() < deadline, "no renewal came");
    }
}

#[tokio::test]
async fn a_renewed_certificate_once_used_retires_the_previous_one() {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    let (machine, old) = port.enrol(TOKEN).await.unwrap();
    let mut renewing = port.sync(&old).await.unwrap();
    let new = renew(&mut renewing).await;
    assert_ne!(new.cert_pem, old.cert_pem);

    // Until the new certificate is used, the old one still is the machine's (the agent may
    // not have kept the new one).
    let _before = port
        .sync(&old)
        .await
        .expect("the old one, before the new is used");
    let mut current = port.sync(&new).await.expect("the renewed certificate");
    let refused = port.sync(&old).await.err().expect("the old one, after");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(current.stays_open(QUIET).await);

    let store = &port.tenancy.store;
    let fingerprint =
        |cert: &IssuedCert| einsora_runtime::pki::fingerprint(&cert.cert_pem).unwrap();
    let old_fp = fingerprint(&old);
    assert!(
        store
            .machine_for_certificate(machine, &old_fp)
            .await
            .unwrap()
            .is_none()
    );
    let new_fp = fingerprint(&new);
    assert!(
        store
            .machine_for_certificate(machine, &new_fp)
            .await
            .unwrap()
            .is_some()
    );
}

/// Only the controller leading its region serves machines: a standby refuses a stream (marked
/// so the agent tries the region's next controller), a leader that stops leading ends every
/// stream so, and leading again it serves them again.
#[tokio::test]
async fn only_the_leader_serves_streams_and_one_that_stops_leading_ends_them() {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    let (_, cert) = port.enrol(TOKEN).await.unwrap();
    let mut open = port.sync(&cert).await.unwrap();

    port.hub.stand_by();
    let ended = closed(&mut open).await;
    let standby = |status: &tonic::Status| {
        status.code() == Code::Unavailable
            && status
                .metadata()
                .get(einsora_proto::metadata::ERROR)
                .map(|v| v.as_bytes())
                == Some(einsora_proto::metadata::STANDBY.as_bytes())
    };
    assert!(standby(&ended), "{ended:?}");
    let refused = port.sync(&cert).await.err().expect("a standby refuses");
    assert!(standby(&refused), "{refused:?}");
    assert!(
        refused.message().contains("stands by"),
        "{}",
        refused.message()
    );

    port.hub.leading_from_now();
    let mut back = port.sync(&cert).await.expect("leading again, it serves");
    assert!(back.stays_open(QUIET).await);
}
