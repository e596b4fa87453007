//! Sessions and statements (layer 5 of the SQL crate): a [`session::Session`] per connection,
//! its settings and transaction state, and one module per statement family. The only layer
//! that knows a `Session`.

pub mod checks;
pub mod copy;
pub mod copy_in;
pub mod cursor;
pub mod ddl;
pub mod dml;
pub mod enums;
pub mod execute;
pub mod explain_analyze;
pub mod indexes;
pub mod insert_dates;
pub mod mview;
pub mod names;
pub mod on_conflict;
pub mod output;
pub mod param_types;
pub mod point_query;
pub mod query;
pub mod recovery;
pub mod returning;
pub mod rows;
pub mod session;
pub mod settings;
pub mod sink;
pub mod source;
pub mod split;
pub mod state;
pub mod statement;
pub mod subscribe;
pub mod transaction;
pub mod update_from;
pub mod update_set;
pub mod users;
pub mod view;
pub mod whole_row;
pub mod with_options;
pub mod writer_update;
