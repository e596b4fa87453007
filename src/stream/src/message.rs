//! What flows between actors (docs/architecture.md, "Messages"): chunks of changes, barriers that cut
//! epochs, and event-time watermarks. A barrier may carry a [`Mutation`] that changes the graph
//! exactly at that epoch boundary.

use std::collections::HashMap;
use std::sync::Arc;

use eddy_common::{Epoch, Result, StreamChunk};
use tokio::sync::mpsc;

pub use crate::route::Router;

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
    pub add_outputs: HashMap<u32, Vec<Target>>,
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

/// Parallel actors fed through a hash exchange: each row goes to the actor owning its vnode;
/// barriers and watermarks go to all of them, failing-row counts only to the first (so they
/// are counted once).
#[derive(Debug, Clone)]
pub struct HashOutput {
    /// The receiving actors, in vnode order (actor `i` owns `codec::vnodes_of(i, n)`).
    pub outputs: Vec<Output>,
    /// Routes rows to vnodes.
    pub router: Arc<dyn Router>,
}

/// Where a relation's changes go: one actor, or several behind a hash exchange.
#[derive(Debug, Clone)]
pub enum Target {
    One(Output),
    Hash(HashOutput),
}

impl From<Output> for Target {
    fn from(o: Output) -> Self {
        Target::One(o)
    }
}

impl Target {
    /// True if one of the receiving actors is in `actors`.
    fn goes_to_any(&self, actors: &[ActorId]) -> bool {
        match self {
            Target::One(o) => actors.contains(&o.actor),
            Target::Hash(h) => h.outputs.iter().any(|o| actors.contains(&o.actor)),
        }
    }

    /// Sends `msg`; false if a receiver is gone (the target is then dropped: its actors
    /// stopped or failed, and a hash exchange missing one actor would lose rows).
    async fn send(&self, msg: &Message) -> Result<bool> {
        let h = match self {
            Target::One(o) => return Ok(o.tx.send(msg.clone()).await.is_ok()),
            Target::Hash(h) => h,
        };
        match msg {
            Message::Chunk(c) if h.outputs.len() > 1 => {
                for (i, part) in c.split_by_owner(&h.router.vnodes(&c.batch)?, h.outputs.len())?.into_iter().enumerate() {
                    if let Some(part) = part {
                        if h.outputs[i].tx.send(Message::Chunk(part)).await.is_err() {
                            return Ok(false);
                        }
                    }
                }
                Ok(true)
            }
            Message::Errors(_) => Ok(h.outputs[0].tx.send(msg.clone()).await.is_ok()),
            _ => {
                for o in &h.outputs {
                    if o.tx.send(msg.clone()).await.is_err() {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }
}

/// The outputs of one relation (table or view), sending its changes downstream.
#[derive(Debug, Default)]
pub struct Dispatcher {
    /// Current outputs.
    outputs: Vec<Target>,
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
    pub fn add(&mut self, o: impl Into<Target>) {
        self.outputs.push(o.into());
    }

    /// Sends `msg` to every output; outputs whose receiver is gone are dropped. Fails only
    /// when a hash exchange cannot route a chunk.
    pub async fn send(&mut self, msg: Message) -> Result<()> {
        let mut closed = Vec::new();
        for (i, o) in self.outputs.iter().enumerate() {
            if !o.send(&msg).await? {
                closed.push(i);
            }
        }
        for i in closed.into_iter().rev() {
            self.outputs.remove(i);
        }
        Ok(())
    }

    /// Forwards `barrier`, then applies its mutation for relation `relation_id`.
    pub async fn send_barrier(&mut self, relation_id: u32, barrier: &Barrier) {
        // Barriers are never routed, so sending one cannot fail.
        let _ = self.send(Message::Barrier(barrier.clone())).await;
        if let Some(m) = &barrier.mutation {
            self.outputs.retain(|o| !o.goes_to_any(&m.stop));
            if let Some(new) = m.add_outputs.get(&relation_id) {
                self.outputs.extend(new.iter().cloned());
            }
        }
    }
}
