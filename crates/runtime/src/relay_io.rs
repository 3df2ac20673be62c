//! One relayed connection's end (a Lab's machines): the bytes of a local stream (a workload's
//! socket on its machine, the proxy's side of an HTTP connection) carried over a pair of gRPC
//! frame streams, each frame at most [`einsora_proto::RELAY_MAX_FRAME`] bytes. Each direction
//! closes on its own: the stream's end read closes the frames going up, the frames coming down
//! ending shuts the stream's writing half. Used by the agent and by the access proxy, each with
//! its own frame type.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// How a frame type carries bytes.
pub trait Frame: Sized + Send + 'static {
    fn data(bytes: Vec<u8>) -> Self;
    /// The bytes a frame carries; `None` for any other frame, which ends the connection.
    fn into_data(self) -> Option<Vec<u8>>;
}

/// Carries `stream`'s bytes up as frames on `up`, and the frames coming `down` into it, until
/// both directions closed (or failed).
pub async fn carry<S, F>(stream: S, up: mpsc::Sender<F>, mut down: tonic::Streaming<F>)
where
    S: AsyncRead + AsyncWrite + Send,
    F: Frame + prost::Message + Default,
{
    let (mut read, mut write) = tokio::io::split(stream);
    let reading = async move {
        let mut buffer = vec![0u8; einsora_proto::RELAY_MAX_FRAME];
        loop {
            let n = match read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if up.send(F::data(buffer[..n].to_vec())).await.is_err() {
                break;
            }
        }
    };
    let writing = async move {
        while let Ok(Some(frame)) = down.message().await {
            let Some(bytes) = frame.into_data() else {
                break;
            };
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    };
    tokio::join!(reading, writing);
}

impl Frame for einsora_proto::agent::v1::TunnelFrame {
    fn data(bytes: Vec<u8>) -> Self {
        use einsora_proto::agent::v1::tunnel_frame::Frame;
        Self {
            frame: Some(Frame::Data(bytes)),
        }
    }

    fn into_data(self) -> Option<Vec<u8>> {
        use einsora_proto::agent::v1::tunnel_frame::Frame;
        match self.frame {
            Some(Frame::Data(bytes)) => Some(bytes),
            _ => None,
        }
    }
}

impl Frame for einsora_proto::internal::v1::RelayFrame {
    fn data(bytes: Vec<u8>) -> Self {
        use einsora_proto::internal::v1::relay_frame::Frame;
        Self {
            frame: Some(Frame::Data(bytes)),
        }
    }

    fn into_data(self) -> Option<Vec<u8>> {
        use einsora_proto::internal::v1::relay_frame::Frame;
        match self.frame {
            Some(Frame::Data(bytes)) => Some(bytes),
            _ => None,
        }
    }
}
