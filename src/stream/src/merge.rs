//! Barrier alignment for actors with several inputs (docs/architecture.md, "Messages"): after barrier E
//! arrives on one input, that input is not read again until E has arrived on every input; then
//! E is passed on once. Chunks are tagged with the input they came from.

use std::future::poll_fn;
use std::task::Poll;

use eddy_common::{internal_err, Result};
use tokio::sync::mpsc;

use crate::message::{Barrier, Message};

/// Several inputs read as one stream with aligned barriers.
pub struct AlignedInputs {
    /// The inputs.
    inputs: Vec<mpsc::Receiver<Message>>,
    /// Barrier each input has delivered and is blocked on.
    blocked: Vec<Option<Barrier>>,
    /// Input polled first next time (round robin, so no input starves).
    next: usize,
}

/// What [`AlignedInputs::next`] yields.
#[derive(Debug)]
pub enum Aligned {
    /// A chunk from input `.0`.
    Chunk(usize, eddy_common::StreamChunk),
    /// A barrier that has arrived on every input.
    Barrier(Barrier),
    /// Changes to the count of failing rows, from input `.0`.
    Errors(usize, Vec<crate::operator::ErrorDelta>),
    /// The watermark of input `.0`.
    Watermark(usize, crate::watermark::Watermark),
}

impl AlignedInputs {
    /// Aligns `inputs`.
    pub fn new(inputs: Vec<mpsc::Receiver<Message>>) -> Self {
        let n = inputs.len();
        Self { inputs, blocked: vec![None; n], next: 0 }
    }

    /// The next chunk or aligned barrier; `Ok(None)` once every input is closed. An input that
    /// closes while others are open is an error: its upstream failed or was dropped, and this
    /// actor can no longer see consistent epochs.
    pub async fn next(&mut self) -> Result<Option<Aligned>> {
        loop {
            if !self.blocked.is_empty() && self.blocked.iter().all(Option::is_some) {
                let epochs: Vec<_> = self.blocked.iter().flatten().map(|b| b.epoch).collect();
                if epochs.windows(2).any(|w| w[0] != w[1]) {
                    return Err(internal_err!("inputs delivered different barriers: {epochs:?}"));
                }
                let barrier = self.blocked[0].take();
                for b in &mut self.blocked {
                    *b = None;
                }
                return Ok(barrier.map(Aligned::Barrier));
            }
            let n = self.inputs.len();
            let start = self.next;
            let got = poll_fn(|cx| {
                let mut closed = 0;
                for k in 0..n {
                    let i = (start + k) % n;
                    if self.blocked[i].is_some() {
                        continue;
                    }
                    match self.inputs[i].poll_recv(cx) {
                        Poll::Ready(Some(m)) => return Poll::Ready(Ok(Some((i, m)))),
                        Poll::Ready(None) => closed += 1,
                        Poll::Pending => {}
                    }
                }
                match closed {
                    0 => Poll::Pending,
                    c if c == n => Poll::Ready(Ok(None)),
                    _ => Poll::Ready(Err(())),
                }
            })
            .await;
            let got = got.map_err(|_| internal_err!("an input of this view closed: the relation it reads failed or was dropped"))?;
            let Some((i, msg)) = got else { return Ok(None) };
            self.next = (i + 1) % n;
            match msg {
                Message::Chunk(c) => return Ok(Some(Aligned::Chunk(i, c))),
                Message::Errors(d) => return Ok(Some(Aligned::Errors(i, d))),
                Message::Watermark(w) => return Ok(Some(Aligned::Watermark(i, w))),
                Message::Barrier(b) => self.blocked[i] = Some(b),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use eddy_common::{Epoch, StreamChunk};

    use super::*;

    fn chunk() -> Message {
        Message::Chunk(StreamChunk::from_pretty(" I\n + 1").unwrap())
    }

    fn barrier(e: u64) -> Message {
        Message::Barrier(Barrier { epoch: Epoch(e), mutation: None })
    }

    #[tokio::test]
    async fn an_input_past_its_barrier_waits_for_the_others() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let mut a = AlignedInputs::new(vec![rx0, rx1]);
        // Input 0 reaches barrier 1 and already has a chunk of epoch 2 queued behind it.
        tx0.send(barrier(1)).await.unwrap();
        tx0.send(chunk()).await.unwrap();
        tx1.send(chunk()).await.unwrap();
        assert!(matches!(a.next().await.unwrap(), Some(Aligned::Chunk(1, _))));
        tx1.send(barrier(1)).await.unwrap();
        // The barrier comes out only once both inputs delivered it, before epoch 2's chunk.
        assert!(matches!(a.next().await.unwrap(), Some(Aligned::Barrier(b)) if b.epoch == Epoch(1)));
        assert!(matches!(a.next().await.unwrap(), Some(Aligned::Chunk(0, _))));
    }

    #[tokio::test]
    async fn mismatched_barriers_are_an_error() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let mut a = AlignedInputs::new(vec![rx0, rx1]);
        tx0.send(barrier(1)).await.unwrap();
        tx1.send(barrier(2)).await.unwrap();
        assert!(a.next().await.is_err());
    }

    #[tokio::test]
    async fn the_stream_ends_when_every_input_closes() {
        let (tx0, rx0) = mpsc::channel::<Message>(8);
        let mut a = AlignedInputs::new(vec![rx0]);
        drop(tx0);
        assert!(a.next().await.unwrap().is_none());
    }
}
