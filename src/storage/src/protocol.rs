//! Pure decisions of the epoch-commit protocol (docs/architecture.md, "Epochs and checkpoints").
//!
//! The store records, inside every epoch's atomic write batch, a [`CommitRecord`] naming that
//! epoch. Because the record and the epoch's state changes land in the same batch, the record
//! read at startup is exactly the last epoch whose changes are all durable. These functions
//! decide what to commit and what recovery means; `store.rs` only performs the I/O.

use eddy_common::{internal_err, Epoch, Result};

/// Version of the on-disk layout; bumped when keys or values change incompatibly.
pub const FORMAT_VERSION: u32 = 1;

/// What the store remembers about the last committed epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitRecord {
    /// The last committed epoch.
    pub epoch: Epoch,
    /// Layout version the data was written with.
    pub format_version: u32,
    /// How many times the store has been opened for writing (or recovered), this open
    /// included. Recorded durably as soon as the store opens ([`record_at_open`]), so no two
    /// opens share one, even if the first dies before committing. Lets callers mint ids that
    /// are unique across restarts (hidden row ids, run ids) without scanning state.
    pub generation: u64,
}

impl CommitRecord {
    /// Serialized form: epoch, format version, generation, all big-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(20);
        v.extend_from_slice(&self.epoch.0.to_be_bytes());
        v.extend_from_slice(&self.format_version.to_be_bytes());
        v.extend_from_slice(&self.generation.to_be_bytes());
        v
    }

    /// Parses [`CommitRecord::encode`]'s output.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 20 {
            return Err(internal_err!("commit record has {} bytes, expected 20", bytes.len()));
        }
        let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
        let format_version = u32::from_be_bytes(bytes[8..12].try_into().unwrap_or([0; 4]));
        Ok(Self { epoch: Epoch(u64_at(0)), format_version, generation: u64_at(12) })
    }
}

/// The state a store starts from after opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Last committed epoch (`Epoch::ZERO` for a new store).
    pub committed: Epoch,
    /// Generation of this open (previous + 1).
    pub generation: u64,
}

/// Decides where a store resumes, given the commit record found on open (if any).
pub fn recover(stored: Option<&[u8]>) -> Result<Recovered> {
    match stored {
        None => Ok(Recovered { committed: Epoch::ZERO, generation: 1 }),
        Some(bytes) => {
            let rec = CommitRecord::decode(bytes)?;
            if rec.format_version > FORMAT_VERSION {
                return Err(internal_err!(
                    "state was written by a newer Eddy (format {}, this build reads up to {})",
                    rec.format_version,
                    FORMAT_VERSION
                ));
            }
            Ok(Recovered { committed: rec.epoch, generation: rec.generation + 1 })
        }
    }
}

/// The record a store writes (durably) as soon as it opens: the recovered epoch in the new
/// generation, so the generation is never handed out twice, even if the process dies before
/// its first commit.
pub fn record_at_open(recovered: &Recovered) -> CommitRecord {
    CommitRecord { epoch: recovered.committed, format_version: FORMAT_VERSION, generation: recovered.generation }
}

/// Validates a proposed commit and returns the record to write with it. Epochs commit in
/// order, each exactly once: a proposal at or below the last committed epoch is a bug.
pub fn decide_commit(last_committed: Epoch, proposed: Epoch, generation: u64) -> Result<CommitRecord> {
    if proposed <= last_committed {
        return Err(internal_err!(
            "epoch {proposed} proposed for commit but epoch {last_committed} is already committed"
        ));
    }
    Ok(CommitRecord { epoch: proposed, format_version: FORMAT_VERSION, generation })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_store_starts_before_the_first_epoch_in_generation_one() {
        assert_eq!(recover(None).unwrap(), Recovered { committed: Epoch::ZERO, generation: 1 });
    }

    #[test]
    fn a_reopened_store_resumes_at_its_last_commit_in_the_next_generation() {
        let rec = CommitRecord { epoch: Epoch(42), format_version: FORMAT_VERSION, generation: 3 };
        assert_eq!(recover(Some(&rec.encode())).unwrap(), Recovered { committed: Epoch(42), generation: 4 });
    }

    #[test]
    fn a_commit_record_survives_encoding() {
        let rec = CommitRecord { epoch: Epoch(u64::MAX - 1), format_version: 1, generation: 9 };
        assert_eq!(CommitRecord::decode(&rec.encode()).unwrap(), rec);
    }

    #[test]
    fn a_truncated_commit_record_is_an_error_not_a_guess() {
        assert!(recover(Some(&[1, 2, 3])).is_err());
    }

    #[test]
    fn state_from_a_newer_format_is_refused() {
        let rec = CommitRecord { epoch: Epoch(1), format_version: FORMAT_VERSION + 1, generation: 1 };
        assert!(recover(Some(&rec.encode())).is_err());
    }

    #[test]
    fn the_generation_recorded_at_open_is_the_next_opens_predecessor() {
        let first = recover(None).unwrap();
        let rec = record_at_open(&first);
        assert_eq!(rec.epoch, Epoch::ZERO);
        let second = recover(Some(&rec.encode())).unwrap();
        assert_eq!(second, Recovered { committed: Epoch::ZERO, generation: 2 });
    }

    #[test]
    fn the_next_epoch_may_commit() {
        let r = decide_commit(Epoch(5), Epoch(6), 2).unwrap();
        assert_eq!(r.epoch, Epoch(6));
        assert_eq!(r.generation, 2);
    }

    #[test]
    fn an_epoch_may_skip_ahead() {
        assert!(decide_commit(Epoch(5), Epoch(9), 1).is_ok());
    }

    #[test]
    fn the_same_epoch_cannot_commit_twice() {
        assert!(decide_commit(Epoch(5), Epoch(5), 1).is_err());
    }

    #[test]
    fn an_older_epoch_cannot_commit_after_a_newer_one() {
        assert!(decide_commit(Epoch(5), Epoch(4), 1).is_err());
    }
}
