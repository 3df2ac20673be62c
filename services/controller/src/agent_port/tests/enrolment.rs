//! Enroll over the port: the token before the CSR, and a limit per address.

use tonic::Code;

use super::harness::Port;

#[tokio::test]
async fn enroll_over_the_port_is_limited_per_address() {
    let port = Port::start(&[("EINSORA_AGENT_ENROL_PER_MINUTE", "2")]).await;
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    port.tenancy.token(token).await;
    port.tenancy.token("enr_second").await;
    let guessed = port.enrol("enr_guess").await.expect_err("a guessed token");
    assert_eq!(guessed.code(), Code::PermissionDenied, "{guessed:?}");
    port.enrol(token).await.expect("a good token");

    let limited = port.enrol("enr_second").await.expect_err("over the limit");
    assert_eq!(limited.code(), Code::ResourceExhausted, "{limited:?}");
    assert!(
        limited
            .message()
            .contains("too many enrolment attempts from this address"),
        "{}",
        limited.message()
    );
    let machines = port
        .tenancy
        .store
        .machines_of(port.tenancy.tenant)
        .await
        .unwrap();
    assert_eq!(
        machines.len(),
        1,
        "the good token over the limit enrolled nothing"
    );
}
