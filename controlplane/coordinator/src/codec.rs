//! The agent channel's message codec: prost encoding with small per-stream buffers.
//!
//! tonic gives every stream an 8 KiB encode and an 8 KiB decode buffer, allocated when the stream
//! opens and kept for its life. The agent channel keeps one long-lived stream per agent and its
//! messages are tens to a few hundred bytes (START/STOP ~50, Register ~100-200), so at 10,000
//! agents those defaults alone are ~160 MB of mostly idle memory. The buffers still grow on
//! demand for a large message (a Register with long diagnostics), so nothing is refused by this
//! choice.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Initial buffer per stream and direction: what the coordinator sends (Registered, START,
/// STOP) fits; the decode buffer grows once if the agent's Register is larger.
const BUFFER_SIZE: usize = 128;
/// Encoded bytes after which a stream yields to the runtime (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with [`BUFFER_SIZE`] buffers; named in build.rs as the generated code's codec.
#[derive(Debug, Clone)]
pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD)
}
