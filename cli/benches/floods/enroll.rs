//! Enroll from one address with bad tokens, as fast as the port lets it: either on kept
//! connections (34 tried, as many as the per-address cap holds, 8 calls in flight on each), or
//! a new connection (TCP, TLS, HTTP/2) for every attempt, 32 at once.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::enrolment_service_client::EnrolmentServiceClient;
use tokio::time::Instant;

use super::legit::io_word;
use super::tally::{self, Shared, Tally};
use super::world::{PATIENCE, World, code};

/// Connections tried on one address (the cap is 32).
const KEPT: usize = 34;
/// Calls in flight on each (the port allows 8 streams a connection).
const IN_FLIGHT: usize = 8;
/// Attempts at once when each has its own connection.
const FRESH: usize = 32;

/// A token of the right shape that was never issued.
fn bad_token() -> String {
    let a = uuid::Uuid::now_v7().simple().to_string();
    format!("enr_{a}.{}", "0".repeat(64))
}

fn request(csr_pem: &str) -> pb::EnrollRequest {
    pb::EnrollRequest {
        enrolment_token: bad_token(),
        csr_pem: csr_pem.to_owned(),
        hostname: "flood".into(),
    }
}

async fn call(
    client: &mut EnrolmentServiceClient<tonic::transport::Channel>,
    csr_pem: &str,
) -> String {
    match tokio::time::timeout(PATIENCE, client.enroll(request(csr_pem))).await {
        Ok(Ok(_)) => "enrolled".into(),
        Ok(Err(status)) => code(status.code()),
        Err(_) => "no answer in 15 s".into(),
    }
}

/// On kept connections.
pub async fn kept(
    world: Arc<World>,
    from: IpAddr,
    csr_pem: Arc<str>,
    window: Duration,
) -> anyhow::Result<Tally> {
    let deadline = Instant::now() + window;
    let shared: Shared = Arc::default();
    let mut connecting = Vec::new();
    for _ in 0..KEPT {
        let world = Arc::clone(&world);
        connecting.push(tokio::spawn(async move { world.connect(from, None).await }));
    }
    let mut tasks = Vec::new();
    for c in connecting {
        let channel = match c.await? {
            Ok(channel) => {
                tally::add(&shared, |t| t.note("connections held", 1));
                channel
            }
            Err(e) => {
                tally::add(&shared, |t| {
                    t.note(&format!("connections refused ({})", io_word(&e)), 1)
                });
                continue;
            }
        };
        for _ in 0..IN_FLIGHT {
            let (shared, csr_pem) = (Arc::clone(&shared), Arc::clone(&csr_pem));
            let mut client = EnrolmentServiceClient::new(channel.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let word = call(&mut client, &csr_pem).await;
                    tally::add(&shared, |t| t.outcome(word));
                }
            }));
        }
    }
    tally::join_all(tasks, "enroll (kept connections)").await?;
    let tally = tally::take(&shared);
    tally.check("enroll (kept connections)")?;
    Ok(tally)
}

/// A new connection for every attempt.
pub async fn fresh(
    world: Arc<World>,
    from: IpAddr,
    csr_pem: Arc<str>,
    window: Duration,
) -> anyhow::Result<Tally> {
    let deadline = Instant::now() + window;
    let shared: Shared = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..FRESH {
        let (world, shared, csr_pem) = (
            Arc::clone(&world),
            Arc::clone(&shared),
            Arc::clone(&csr_pem),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let word = match world.connect(from, None).await {
                    Ok(channel) => call(&mut EnrolmentServiceClient::new(channel), &csr_pem).await,
                    Err(e) => {
                        // Not a spin: a refused connection is retried after 10 ms.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        format!("connection refused ({})", io_word(&e))
                    }
                };
                tally::add(&shared, |t| t.outcome(word));
            }
        }));
    }
    tally::join_all(tasks, "enroll (a connection each)").await?;
    let tally = tally::take(&shared);
    tally.check("enroll (a connection each)")?;
    Ok(tally)
}
