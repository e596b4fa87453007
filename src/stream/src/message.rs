//! What flows between actors (docs/architecture.md, "Messages"): chunks of changes, barriers that cut
//! epochs, and event-time watermarks. A barrier may carry a [`Mutation`] that changes the graph
//! exactly at that epoch boundary.

use std::collections::HashMap;
use std::sync::Arc;

use eddy_common::{Epoch, StreamChunk};
use tokio::sync::mpsc;

/// Identifies an actor (a table's source actor or a view's actor) in the barrier manager.
pub type ActorId = u32;

/// Channel capacity between actors, in messages; a full channel back-pressures the sender.
pub const CHANNEL_CAPACITY: usize = 16;

/// A graph change applied when an actor processes the barrier that carries it.
#[derive(Debug, Default)]
pub struct Mutation {
    /// New downstream outputs, by the relation id of the upstream that must send to them. The
    /// upstream adds them *after* forwarding this barrier, so they receive exactly the changes
    /// of later epochs (their backfill reads the snapshot of this barrier's epoch).
    pub add_outputs: HashMap<u32, Vec<Output>>,
    /// Actors that stop after this barrier (their upstreams drop them as outputs).
    pub stop: Vec<ActorId>,
    /// Source readers that start producing after this barrier (see the source module).
    pub start: Vec<ActorId>,
}

/// A barrier: everything before it on a channel belongs to `epoch` or earlier.
#[derive(Debug, Clone)]
pub struct Barrier {
    /// The epoch this barrier closes.
    pub epoch: Epoch,
    /// Graph change to apply at this barrier.
    pub mutation: Option<Arc<Mutation>>,
}

impl Barrier {
    /// True if this barrier stops `actor`.
    pub fn stops(&self, actor: ActorId) -> bool {
        self.mutation.as_ref().is_some_and(|m| m.stop.contains(&actor))
    }
}

/// A message on a channel between actors.
#[derive(Debug, Clone)]
pub enum Message {
    /// Changes.
    Chunk(StreamChunk),
    /// End of an epoch.
    Barrier(Barrier),
    /// Changes to the upstream view's count of failing input rows (they count for this view too).
    Errors(Vec<crate::operator::ErrorDelta>),
    /// The sender's current event-time watermark (sent before each barrier once it has one).
    Watermark(crate::watermark::Watermark),
}

/// A downstream output: the receiving actor's id and channel.
#[derive(Debug, Clone)]
pub struct Output {
    /// Receiving actor.
    pub actor: ActorId,
    /// Its input channel.
    pub tx: mpsc::Sender<Message>,
}

/// The outputs of one relation (table or view), broadcasting its changes downstream.
#[derive(Debug, Default)]
pub struct Dispatcher {
    /// Current outputs.
    outputs: Vec<Output>,
}

impl Dispatcher {
    /// Number of downstream outputs.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// True without outputs (nobody needs this relation's change stream).
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Adds an output.
    pub fn add(&mut self, o: Output) {
        self.outputs.push(o);
    }

    /// Sends `msg` to every output; outputs whose receiver is gone are dropped.
    pub async fn send(&mut self, msg: Message) {
        let mut closed = Vec::new();
        for (i, o) in self.outputs.iter().enumerate() {
            if o.tx.send(msg.clone()).await.is_err() {
                closed.push(i);
            }
        }
        for i in closed.into_iter().rev() {
            self.outputs.remove(i);
        }
    }

    /// Forwards `barrier`, then applies its mutation for relation `relation_id`.
    pub async fn send_barrier(&mut self, relation_id: u32, barrier: &Barrier) {
        self.send(Message::Barrier(barrier.clone())).await;
        if let Some(m) = &barrier.mutation {
            self.outputs.retain(|o| !m.stop.contains(&o.actor));
            if let Some(new) = m.add_outputs.get(&relation_id) {
                self.outputs.extend(new.iter().cloned());
            }
        }
    }
}
