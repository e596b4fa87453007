//! `CREATE USER` / `CREATE ROLE`, `ALTER USER` / `ALTER ROLE` and `DROP USER` / `DROP ROLE`.
//!
//! Users live in the catalog ([`crate::catalog::UserCatalog`]) with a SCRAM-SHA-256 verifier,
//! never a password; the server authenticates clients against them (`eddy_server::auth`). The
//! built-in superuser [`BOOTSTRAP_USER`] always exists; it gets a catalog entry only when its
//! password is set. Only superusers manage roles, except that a user may change their own
//! password, as in PostgreSQL.

use datafusion::sql::sqlparser::ast::{AlterRoleOperation, CreateRole, Expr, Ident, ObjectName, Password, RoleOption, Value};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};
use eddy_storage::EpochBatch;

use crate::catalog::users::ScramVerifier;
use crate::catalog::{CatalogChange, UserCatalog};
use crate::frontend::session::Session;
use crate::frontend::statement::ident_name;

/// The superuser that exists without being created (the default user of `psql -U root`).
pub const BOOTSTRAP_USER: &str = "root";

/// The verifier to store for a `PASSWORD` clause: `None` for `PASSWORD NULL`.
fn verifier_of(password: &Password) -> Result<Option<String>> {
    let text = match password {
        Password::NullPassword => return Ok(None),
        Password::Password(Expr::Value(v)) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) | Value::DollarQuotedString(datafusion::sql::sqlparser::ast::DollarQuotedString { value: s, .. }) => s.clone(),
            Value::Null => return Ok(None),
            other => return Err(user_err!(sqlstate::SYNTAX_ERROR, "a password must be a string literal, not {other}")),
        },
        Password::Password(other) => return Err(user_err!(sqlstate::SYNTAX_ERROR, "a password must be a string literal, not {other}")),
    };
    if text.is_empty() {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "empty password"));
    }
    if text.starts_with("SCRAM-SHA-256$") {
        return ScramVerifier::parse(&text)
            .map(|v| Some(v.to_text()))
            .ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid SCRAM-SHA-256 verifier"));
    }
    if text.len() == 35 && text.starts_with("md5") && text[3..].bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_supported!("MD5 password hashes are not supported; set the password itself or a SCRAM-SHA-256 verifier"));
    }
    Ok(Some(ScramVerifier::generate(&text).to_text()))
}

fn role_name(name: &ObjectName) -> Result<String> {
    match name.0.as_slice() {
        [part] => part.as_ident().map(ident_name).ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "invalid role name {name}")),
        _ => Err(user_err!(sqlstate::SYNTAX_ERROR, "role names cannot be qualified: {name}")),
    }
}

impl Session {
    /// Superusers manage roles: the bootstrap user, users created SUPERUSER, and any user the
    /// catalog does not know (clients admitted by trust or by the password file).
    fn is_superuser(&self) -> bool {
        self.user == BOOTSTRAP_USER || self.engine.catalog().user(&self.user).is_none_or(|u| u.superuser)
    }

    fn require_superuser(&self, action: &str) -> Result<()> {
        if self.is_superuser() {
            Ok(())
        } else {
            Err(user_err!(sqlstate::INSUFFICIENT_PRIVILEGE, "permission denied to {action}"))
        }
    }

    /// `CREATE USER` (`login` = true) or `CREATE ROLE` (`login` = false unless `LOGIN`).
    pub(crate) async fn create_roles(&mut self, cr: &CreateRole, login: bool) -> Result<&'static str> {
        self.require_superuser("create role")?;
        let verifier = cr.password.as_ref().map(verifier_of).transpose()?.flatten();
        let names = cr.names.iter().map(role_name).collect::<Result<Vec<_>>>()?;
        let mut skipped = Vec::new();
        self.engine
            .ddl(|cat| {
                let mut changes = Vec::new();
                for name in &names {
                    if name == BOOTSTRAP_USER || cat.user(name).is_some() {
                        if cr.if_not_exists {
                            skipped.push(name.clone());
                            continue;
                        }
                        return Err(user_err!(sqlstate::DUPLICATE_OBJECT, "role \"{name}\" already exists"));
                    }
                    let id = cat.allocate_id();
                    changes.push(CatalogChange::CreateUser(UserCatalog {
                        id,
                        name: name.clone(),
                        verifier: verifier.clone(),
                        login: cr.login.unwrap_or(login),
                        superuser: cr.superuser.unwrap_or(false),
                    }));
                }
                Ok((changes, EpochBatch::default()))
            })
            .await?;
        for name in skipped {
            self.notice(&format!("role \"{name}\" already exists, skipping"));
        }
        Ok("CREATE ROLE")
    }

    /// `ALTER USER` / `ALTER ROLE`: password, LOGIN, SUPERUSER, RENAME TO.
    pub(crate) async fn alter_role(&mut self, name: &Ident, operation: &AlterRoleOperation) -> Result<&'static str> {
        let name = ident_name(name);
        let own_password_only = matches!(operation, AlterRoleOperation::WithOptions { options }
            if options.iter().all(|o| matches!(o, RoleOption::Password(_))));
        if !(own_password_only && name == self.user) {
            self.require_superuser("alter role")?;
        }
        let current = self.user.clone();
        self.engine
            .ddl(|cat| {
                let mut user = match cat.user(&name) {
                    Some(u) => u.clone(),
                    None if name == BOOTSTRAP_USER => {
                        UserCatalog { id: cat.allocate_id(), name: name.clone(), verifier: None, login: true, superuser: true }
                    }
                    None => return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "role \"{name}\" does not exist")),
                };
                match operation {
                    AlterRoleOperation::WithOptions { options } => {
                        for o in options {
                            match o {
                                RoleOption::Password(p) => user.verifier = verifier_of(p)?,
                                RoleOption::Login(b) => user.login = *b,
                                RoleOption::SuperUser(b) if name != BOOTSTRAP_USER => user.superuser = *b,
                                RoleOption::SuperUser(_) => {}
                                other => return Err(not_supported!("role option {other} is not supported")),
                            }
                        }
                    }
                    AlterRoleOperation::RenameRole { role_name } => {
                        let to = ident_name(role_name);
                        if name == BOOTSTRAP_USER || name == current {
                            return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "role \"{name}\" cannot be renamed"));
                        }
                        if to == BOOTSTRAP_USER || cat.user(&to).is_some() {
                            return Err(user_err!(sqlstate::DUPLICATE_OBJECT, "role \"{to}\" already exists"));
                        }
                        // A SCRAM verifier does not depend on the name: the password survives.
                        user.name = to;
                    }
                    other => return Err(not_supported!("ALTER ROLE {other} is not supported")),
                }
                Ok((vec![CatalogChange::CreateUser(user)], EpochBatch::default()))
            })
            .await?;
        Ok("ALTER ROLE")
    }

    /// `DROP USER` / `DROP ROLE`.
    pub(crate) async fn drop_roles(&mut self, names: &[ObjectName], if_exists: bool) -> Result<&'static str> {
        self.require_superuser("drop role")?;
        let names = names.iter().map(role_name).collect::<Result<Vec<_>>>()?;
        let current = self.user.clone();
        let mut skipped = Vec::new();
        self.engine
            .ddl(|cat| {
                let mut changes = Vec::new();
                for name in &names {
                    if *name == current {
                        return Err(user_err!("55006", "current user cannot be dropped"));
                    }
                    if name == BOOTSTRAP_USER {
                        return Err(user_err!(sqlstate::INSUFFICIENT_PRIVILEGE, "cannot drop role {name} because it is required by the database system"));
                    }
                    match cat.user(name) {
                        Some(u) => changes.push(CatalogChange::DropUser(u.clone())),
                        None if if_exists => skipped.push(name.clone()),
                        None => return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "role \"{name}\" does not exist")),
                    }
                }
                Ok((changes, EpochBatch::default()))
            })
            .await?;
        for name in skipped {
            self.notice(&format!("role \"{name}\" does not exist, skipping"));
        }
        Ok("DROP ROLE")
    }
}
