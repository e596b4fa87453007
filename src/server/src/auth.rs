//! Client authentication: trust (the default, on loopback), or SCRAM-SHA-256 when the server is
//! given `--password` or `--password-file`.
//!
//! Under SCRAM a user's verifier comes from, in order: the catalog (`CREATE USER name PASSWORD
//! '...'` / `ALTER USER`), the password file (`user:password` lines, hashed when loaded), and
//! `--password` (the password of every user defined nowhere else, as before users existed).
//! A user with no verifier anywhere goes through the same exchange against a random verifier
//! and fails with the same `28P01 password authentication failed` as a wrong password, so a
//! client cannot tell which users exist. Only verifiers are kept in memory or in the catalog.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_sql::catalog::users::ScramVerifier;
use eddy_sql::Engine;
use pgwire::api::auth::sasl::scram::ScramSecret;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{PgWireError, PgWireResult};

use crate::config::ServerConfig;

/// Where SCRAM verifiers come from.
pub struct Credentials {
    /// The database, for users created with SQL (set once it is open).
    engine: OnceLock<Arc<Engine>>,
    /// Users of the password file.
    file: HashMap<String, ScramVerifier>,
    /// `--password`: for every user not defined elsewhere.
    shared: Option<ScramVerifier>,
    /// Random per process: derives the mock verifiers of unknown users.
    mock_secret: [u8; 32],
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("file_users", &self.file.len()).field("shared", &self.shared.is_some()).finish()
    }
}

impl Credentials {
    /// The credentials `config` asks for, or `None` for trust authentication.
    pub fn from_config(config: &ServerConfig) -> Result<Option<Arc<Self>>> {
        if config.password.is_none() && config.password_file.is_none() {
            return Ok(None);
        }
        let file = match &config.password_file {
            Some(path) => read_password_file(path)?,
            None => HashMap::new(),
        };
        let shared = config.password.as_deref().map(ScramVerifier::generate);
        Ok(Some(Arc::new(Self { engine: OnceLock::new(), file, shared, mock_secret: rand::random() })))
    }

    /// Connects the credentials to the database's users.
    pub fn set_engine(&self, engine: Arc<Engine>) {
        // Set once at startup; a second call keeps the first engine.
        let _ = self.engine.set(engine);
    }

    /// The verifier `user` must match, if the user has one.
    pub fn verifier(&self, user: &str) -> Option<ScramVerifier> {
        if let Some(engine) = self.engine.get() {
            if let Some(u) = engine.catalog().user(user) {
                // A created user logs in only with its own password, and only if it may.
                return u.verifier.as_deref().filter(|_| u.login).and_then(ScramVerifier::parse);
            }
        }
        self.file.get(user).cloned().or_else(|| self.shared.clone())
    }
}

/// Reads `user:password` lines (blank lines and `#` comments skipped; the password is
/// everything after the first colon).
fn read_password_file(path: &Path) -> Result<HashMap<String, ScramVerifier>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot read password file {}: {e}", path.display()))?;
    parse_password_file(&text).map_err(|line| {
        user_err!(sqlstate::INVALID_PARAMETER_VALUE, "password file {} line {line}: expected user:password", path.display())
    })
}

/// Parses a password file's text; `Err(line number)` for a malformed line.
pub fn parse_password_file(text: &str) -> std::result::Result<HashMap<String, ScramVerifier>, usize> {
    let mut users = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((user, password)) if !user.trim().is_empty() && !password.is_empty() => {
                users.insert(user.trim().to_string(), ScramVerifier::generate(password));
            }
            _ => return Err(n + 1),
        }
    }
    Ok(users)
}

#[async_trait]
impl AuthSource for Credentials {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        // Only verifiers exist here; SCRAM asks for them through `get_scram_secret`.
        Err(PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
            "FATAL".into(),
            sqlstate::INVALID_AUTHORIZATION_SPECIFICATION.into(),
            "only SCRAM-SHA-256 authentication is supported".into(),
        ))))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let user = login.user().unwrap_or_default();
        // An unknown user meets a mock verifier: the exchange fails like a wrong password.
        let v = self.verifier(user).unwrap_or_else(|| ScramVerifier::mock(&self.mock_secret, user));
        let secret = ScramSecret::Verifier {
            salt: v.salt,
            iterations: v.iterations as usize,
            stored_key: v.stored_key,
            server_key: v.server_key,
        };
        Ok((secret, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_files_hold_verifiers_not_passwords() {
        let users = parse_password_file("# admins\nroot:s3cret\n\nalice:pa:ss:word\n").unwrap();
        assert_eq!(users.len(), 2);
        assert!(users["root"].matches("s3cret"));
        assert!(users["alice"].matches("pa:ss:word"));
        assert!(!users["alice"].matches("pa"));
        assert_eq!(parse_password_file("root\n"), Err(1));
        assert_eq!(parse_password_file("ok:1\n:nobody\n"), Err(2));
    }
}
