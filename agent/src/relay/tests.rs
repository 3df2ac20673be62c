//! The agent's side of a tunnel against a fake controller (a real RelayService on loopback)
//! and a real workload socket in a temporary run directory: the answer names the request,
//! bytes go both ways and each end closes on its own; a socket that isn't the workload's own is
//! refused, nothing dialled; and only a ready workload's reported socket, of the attempt asked
//! for, is ever named.

use std::pin::Pin;
use std::time::Duration;

use einsora_core::ids::WorkloadId;
use einsora_proto::agent::v1::relay_service_server::{RelayService, RelayServiceServer};
use einsora_proto::convert::{AccessTarget, WorkloadStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use super::*;

const PATIENCE: Duration = Duration::from_secs(10);

type Frames = Pin<Box<dyn Stream<Item = Result<pb::TunnelFrame, Status>> + Send>>;
/// A tunnel as the fake controller holds it: what the agent sends, where to send it bytes.
type Tunnel = (
    Streaming<pb::TunnelFrame>,
    mpsc::Sender<Result<pb::TunnelFrame, Status>>,
);

/// Hands each tunnel to the test: what the agent sends, and where to send it bytes.
struct Fake {
    tunnels: mpsc::UnboundedSender<Tunnel>,
}

#[tonic::async_trait]
impl RelayService for Fake {
    type ListenStream = Pin<Box<dyn Stream<Item = Result<pb::OpenRequest, Status>> + Send>>;
    type TunnelStream = Frames;

    async fn listen(
        &self,
        _: Request<pb::ListenRequest>,
    ) -> Result<Response<Self::ListenStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn tunnel(
        &self,
        request: Request<Streaming<pb::TunnelFrame>>,
    ) -> Result<Response<Frames>, Status> {
        let (tx, rx) = mpsc::channel(2);
        self.tunnels.send((request.into_inner(), tx)).unwrap();
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

async fn controller() -> (Channel, mpsc::UnboundedReceiver<Tunnel>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tunnels, rx) = mpsc::unbounded_channel();
    let fake = Fake { tunnels };
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RelayServiceServer::new(fake))
            .serve_with_incoming(incoming),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (channel, rx)
}

fn data(bytes: &[u8]) -> pb::TunnelFrame {
    pb::TunnelFrame {
        frame: Some(pb::tunnel_frame::Frame::Data(bytes.to_vec())),
    }
}

async fn next(stream: &mut Streaming<pb::TunnelFrame>) -> Option<pb::TunnelFrame> {
    tokio::time::timeout(PATIENCE, stream.message())
        .await
        .expect("in time")
        .expect("no error")
}

/// A workload's server: answers each line in capitals, and closes once its client did.
fn shouting_server(path: &std::path::Path) {
    let listener = UnixListener::bind(path).unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buffer = [0u8; 64];
        loop {
            let n = stream.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            stream
                .write_all(&buffer[..n].to_ascii_uppercase())
                .await
                .unwrap();
        }
    });
}

#[tokio::test]
async fn a_tunnel_answers_its_request_and_carries_bytes_until_both_ends_close() {
    let root = tempfile::tempdir().unwrap();
    let run = root.path().join("w1");
    std::fs::create_dir(&run).unwrap();
    shouting_server(&run.join("jl.sock"));
    let (channel, mut tunnels) = controller().await;

    answer(channel, vec![7; 16], Ok(run.join("jl.sock")));
    let (mut up, down) = tunnels.recv().await.unwrap();
    let Some(pb::TunnelFrame {
        frame: Some(pb::tunnel_frame::Frame::Answer(answered)),
    }) = next(&mut up).await
    else {
        panic!("the first frame answers");
    };
    assert_eq!(
        (answered.id, answered.refused),
        (vec![7; 16], String::new())
    );

    down.send(Ok(data(b"hello\n"))).await.unwrap();
    assert_eq!(next(&mut up).await, Some(data(b"HELLO\n")));
    // The controller's side closes: the workload sees its client close, and closes too.
    drop(down);
    assert_eq!(next(&mut up).await, None);
}

#[tokio::test]
async fn a_link_in_place_of_the_socket_is_refused_and_nothing_dialled() {
    let root = tempfile::tempdir().unwrap();
    let (run, elsewhere) = (root.path().join("w1"), root.path().join("w2"));
    std::fs::create_dir(&run).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    let _sibling = UnixListener::bind(elsewhere.join("jl.sock")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("jl.sock"), run.join("jl.sock")).unwrap();
    let (channel, mut tunnels) = controller().await;

    answer(channel, vec![1; 16], Ok(run.join("jl.sock")));
    let (mut up, _down) = tunnels.recv().await.unwrap();
    let Some(pb::TunnelFrame {
        frame: Some(pb::tunnel_frame::Frame::Answer(answered)),
    }) = next(&mut up).await
    else {
        panic!("the first frame answers");
    };
    assert!(
        answered.refused.starts_with("its socket: not a socket"),
        "{}",
        answered.refused
    );
    assert_eq!(next(&mut up).await, None, "and nothing more");
}

#[test]
fn only_a_ready_workloads_own_socket_of_the_attempt_asked_for_is_named() {
    let w = WorkloadId::new();
    let status = |attempt, code, target: bool| WorkloadStatus {
        workload_id: w,
        attempt,
        mode: Mode::Run,
        code,
        driver: "linux-native".into(),
        access_target: target.then(|| AccessTarget {
            socket_path: "/state/run/w/jl.sock".into(),
            token: "t".into(),
        }),
    };
    let statuses = |s: Vec<WorkloadStatus>| WorkloadStatuses {
        workloads: s,
        driver_restarts: 0,
    };
    let asked = |attempt| pb::OpenRequest {
        id: vec![0; 16],
        workload_id: w.to_string(),
        attempt,
    };
    let ready = statuses(vec![status(2, StatusCode::Ready, true)]);
    assert_eq!(
        socket_of(&ready, &asked(2)),
        Ok(PathBuf::from("/state/run/w/jl.sock"))
    );
    let why = socket_of(&ready, &asked(1)).unwrap_err();
    assert_eq!(why, "its attempt 2 runs here, not 1");
    let starting = statuses(vec![status(2, StatusCode::Starting, true)]);
    assert_eq!(
        socket_of(&starting, &asked(2)).unwrap_err(),
        "it isn't ready here"
    );
    let none = statuses(vec![]);
    assert_eq!(
        socket_of(&none, &asked(2)).unwrap_err(),
        "no such workload runs on this machine"
    );
}
