//! Shared vocabulary of every Eddy layer (see `docs/architecture.md`): the error type with its
//! SQLSTATE, the SQL column types and their Arrow/PostgreSQL mapping, epochs, the change-carrying
//! `StreamChunk`, and the key/value encoding of rows in the state store.

pub mod chunk;
pub mod cast;
pub mod codec;
pub mod date_text;
pub mod epoch;
pub mod error;
pub mod interval;
pub mod percentile;
pub mod text;
pub mod text_out;
pub mod types;

pub use chunk::{Op, StreamChunk};
pub use epoch::Epoch;
pub use error::{EddyError, ErrorKind, Result};
pub use types::{ColumnType, JSONB_METADATA_KEY};
