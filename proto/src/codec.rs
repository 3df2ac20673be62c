//! The codec every generated client and server uses: prost, with small first buffers. tonic's
//! default gives each stream an 8 KiB buffer each way, held for as long as the stream is open;
//! the agents' port holds a Sync stream per machine for good, and nearly every message Einsora
//! sends is a few hundred bytes. A larger message grows its buffer as it needs (a relay frame,
//! a long list), so nothing is refused or split for it.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// A stream's first buffer each way.
const FIRST_BUFFER: usize = 512;
/// tonic's own: how much one encode may buffer before the stream yields.
const YIELD_THRESHOLD: usize = 32 << 10;

#[derive(Debug, Clone, Copy)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(FIRST_BUFFER, YIELD_THRESHOLD)
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(settings())
    }
}
