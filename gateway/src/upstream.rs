//! Calling the api generically: any RPC by its path, the request already encoded, the answer
//! left encoded for the caller to decode against its descriptor.

use std::time::Duration;

use axum::http::uri::PathAndQuery;
use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
use tonic::{Response, Status};

/// The largest answer the gateway reads from the api: a page of a thousand workload output
/// lines of 16 KiB each, and room to spare (tonic's default is 4 MiB).
const MAX_ANSWER_BYTES: usize = 24 << 20;

/// How long the gateway waits for the api before answering 503.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Passes encoded messages through untouched.
#[derive(Debug, Clone, Copy, Default)]
struct Passthrough;

impl Codec for Passthrough {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Passthrough;
    type Decoder = Passthrough;

    fn encoder(&mut self) -> Self::Encoder {
        Passthrough
    }

    fn decoder(&mut self) -> Self::Decoder {
        Passthrough
    }
}

impl Encoder for Passthrough {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Passthrough {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// One unary call. Transport failures come back as statuses (UNAVAILABLE, or
/// DEADLINE_EXCEEDED when the api is too slow).
pub(crate) async fn call(
    channel: Channel,
    path: PathAndQuery,
    message: Bytes,
    metadata: MetadataMap,
) -> Result<Response<Bytes>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_ANSWER_BYTES);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("the api connection is not ready: {e}")))?;
    let mut request = tonic::Request::from_parts(metadata, Default::default(), message);
    request.set_timeout(CALL_TIMEOUT);
    tokio::time::timeout(CALL_TIMEOUT, grpc.unary(request, path, Passthrough))
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("the api did not answer in time")))
}

/// One server-streaming call: the wait for the api's first answer is bounded as a unary call's
/// is; the stream then lasts as long as the api sends (the caller going away ends it).
pub(crate) async fn stream(
    channel: Channel,
    path: PathAndQuery,
    message: Bytes,
    metadata: MetadataMap,
) -> Result<Response<tonic::Streaming<Bytes>>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_ANSWER_BYTES);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("the api connection is not ready: {e}")))?;
    let request = tonic::Request::from_parts(metadata, Default::default(), message);
    let call = grpc.server_streaming(request, path, Passthrough);
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("the api did not answer in time")))
}
