//! Transaction blocks: `BEGIN`, `COMMIT`, `ROLLBACK`, savepoints.


use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::frontend::session::Session;
use crate::frontend::statement::ident_name;


impl Session {
    /// Position of the newest savepoint called `name`.
    pub(crate) fn savepoint_index(&self, name: &datafusion::sql::sqlparser::ast::Ident, what: &str) -> Result<usize> {
        if !self.in_transaction {
            return Err(user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "{what} can only be used in transaction blocks"));
        }
        let name = ident_name(name);
        self.savepoints
            .iter()
            .rposition(|s| *s == name)
            .ok_or_else(|| user_err!(sqlstate::INVALID_SAVEPOINT_SPECIFICATION, "savepoint \"{name}\" does not exist"))
    }
}
