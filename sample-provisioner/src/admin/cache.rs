//! [`AdminClients`]: admin clients kept for reuse, so that the calls to
//! one store share one HTTP client and its connections.

use std::collections::HashMap;
use std::sync::Mutex;

use lib_provisioner::Credentials;

use super::client::{AdminClient, AdminError};

/// Admin clients kept for reuse, one per endpoint, region and admin key
/// pair; past [`AdminClients::MAX`] the cache starts over (rotated keys).
#[derive(Debug, Default)]
pub struct AdminClients {
    clients: Mutex<HashMap<ClientKey, AdminClient>>,
}

/// What a client is built from. Holds a secret: `Debug` shows the endpoint
/// only.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ClientKey(String, String, String, String);

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ClientKey")
            .field(&self.0)
            .finish_non_exhaustive()
    }
}

impl AdminClients {
    /// Clients kept at most.
    pub const MAX: usize = 64;

    /// The client for `endpoint` and `region` with `credentials`.
    pub fn get(
        &self,
        endpoint: &str,
        region: &str,
        credentials: &Credentials,
    ) -> Result<AdminClient, AdminError> {
        let key = ClientKey(
            endpoint.to_owned(),
            region.to_owned(),
            credentials.access_key_id.clone(),
            credentials.secret_access_key.clone(),
        );
        // A poisoned lock only means another thread panicked mid-insert.
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        if clients.len() >= Self::MAX {
            clients.clear();
        }
        let client = AdminClient::new(endpoint, region, credentials.clone())?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}
