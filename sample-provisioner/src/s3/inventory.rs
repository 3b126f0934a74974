//! What this provisioner made in a class's store, for the library's sweep
//! ([`Provisioner::inventory`], [`Provisioner::remove_orphan`]): users and
//! canned policies told by their names ([`MadeNames`]), buckets by the
//! owner tag (which a claim's own key may not write: its policy allows
//! object and listing actions only) with the reclaim policy their tags
//! record. Never what an administrator made. An orphaned bucket is deleted
//! only when its tags, read again, still record `Delete`.
//!
//! [`Provisioner::inventory`]: lib_provisioner::Provisioner::inventory
//! [`Provisioner::remove_orphan`]: lib_provisioner::Provisioner::remove_orphan

use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::{InventoryRequest, Made, MadeKind, OrphanRemoval};
use tracing::info;

use super::{Resolved, S3Provisioner};
use crate::access::PER_CLAIM_MODE;
use crate::admin::{AdminClient, AdminError};
use crate::credentials::made_names::{Family, MadeNames, Ours};
use crate::ownership::ClaimKind;
use crate::params::{ClassName, Ownership};
use crate::store::Deletion;

impl S3Provisioner {
    /// Lists the users, policies and tagged buckets the class's family
    /// made on its store.
    pub(super) async fn list_made(
        &self,
        req: &InventoryRequest,
    ) -> Result<Vec<Made>, ProvisionError> {
        let family = Family::of(&req.class_kind);
        let r = self.resolve(class_name(req), &req.parameters).await?;
        let store = r.params.endpoint.url.clone();
        let mut made = Vec::new();
        if family != Family::Buckets {
            let admin = self.listing_admin(&r, req)?;
            let names = MadeNames::new(&req.owners);
            let users = admin
                .list_users()
                .await
                .map_err(|e| listing_error(e, &store))?;
            for user in users.keys() {
                push(
                    &mut made,
                    MadeKind::Principal,
                    &store,
                    user,
                    names.user(family, user),
                );
            }
            let policies = admin
                .list_canned_policies()
                .await
                .map_err(|e| listing_error(e, &store))?;
            for policy in &policies {
                push(
                    &mut made,
                    MadeKind::Policy,
                    &store,
                    policy,
                    names.policy(family, policy),
                );
            }
        }
        if family != Family::Principals && r.params.ownership == Ownership::Tags {
            let kind = match family {
                Family::Claims => ClaimKind::ObjectBucketClaim,
                _ => ClaimKind::BucketClaim,
            };
            self.list_tagged_buckets(&r, kind, &mut made).await?;
        }
        Ok(made)
    }

    /// Buckets carrying the owner tag, with the owner and the reclaim
    /// policy their tags record; of those that name their claim's API,
    /// only `kind`'s.
    async fn list_tagged_buckets(
        &self,
        r: &Resolved,
        kind: ClaimKind,
        made: &mut Vec<Made>,
    ) -> Result<(), ProvisionError> {
        let store = &r.params.endpoint.url;
        let buckets = r
            .store
            .bucket_names()
            .await
            .map_err(|f| f.into_provision_error())?;
        for bucket in buckets.iter().filter(|b| **b != self.state_bucket) {
            match r.store.tagged(bucket).await {
                Ok(Some(tagged)) if tagged.kind.is_none_or(|k| k == kind) => {
                    let mut m =
                        Made::new(MadeKind::Bucket, store, bucket).owned_by(tagged.owner_uid);
                    if let Some(policy) = tagged.reclaim {
                        m = m.with_reclaim(policy);
                    }
                    made.push(m);
                }
                Ok(_) => {}
                // Gone between the listing and the tag: nothing to report.
                Err(f) if f.is_no_such_bucket() => {}
                Err(f) => return Err(f.into_provision_error()),
            }
        }
        Ok(())
    }

    /// Removes an orphaned user (and the policies of ours attached to it)
    /// or policy, after checking again that its name is one this
    /// provisioner gives; or deletes an orphaned bucket whose tags, read
    /// again, still record its owner and `Delete`.
    pub(super) async fn remove_made(&self, req: &OrphanRemoval) -> Result<(), ProvisionError> {
        let family = Family::of(&req.class_kind);
        let names = MadeNames::default();
        let m = &req.made;
        let ours = match m.kind {
            MadeKind::Principal => names.user(family, &m.name),
            MadeKind::Policy => names.policy(family, &m.name),
            _ => return self.delete_orphaned_bucket(req).await,
        };
        if ours != Ours::Orphan {
            return Err(ProvisionError::permanent(format!(
                "{} {} is not a name this provisioner gives through a {}: left alone",
                m.kind, m.name, req.class_kind
            )));
        }
        let request = InventoryRequest::new(&req.class_name, req.parameters.clone())
            .with_class_kind(&req.class_kind);
        let r = self.resolve(class_name(&request), &req.parameters).await?;
        let admin = self.listing_admin(&r, &request)?;
        let store = r.params.endpoint.url.clone();
        let fail = |e| listing_error(e, &store);
        if m.kind == MadeKind::Policy {
            admin.remove_canned_policy(&m.name).await.map_err(fail)?;
            info!(%store, policy = %m.name, "removed an orphaned policy");
            return Ok(());
        }
        let Some(user) = admin.user_info(&m.name).await.map_err(fail)? else {
            return Ok(());
        };
        admin.remove_user(&m.name).await.map_err(fail)?;
        for policy in user.policies() {
            if names.policy(family, policy) == Ours::Orphan {
                admin.remove_canned_policy(policy).await.map_err(fail)?;
            }
        }
        info!(%store, user = %m.name, "removed an orphaned user and its policy");
        Ok(())
    }

    /// Deletes an orphaned bucket through its class's store, objects first
    /// only where the class sets `forceDelete` (as a claim's deletion).
    async fn delete_orphaned_bucket(&self, req: &OrphanRemoval) -> Result<(), ProvisionError> {
        let m = &req.made;
        let Some(owner) = m.owner_uid.as_deref() else {
            return Err(ProvisionError::permanent(format!(
                "bucket {} is kept: no owner is recorded with it",
                m.name
            )));
        };
        let request = InventoryRequest::new(&req.class_name, req.parameters.clone())
            .with_class_kind(&req.class_kind);
        let r = self.resolve(class_name(&request), &req.parameters).await?;
        let store = &r.params.endpoint.url;
        match r
            .store
            .delete_orphan(&m.name, owner, r.params.force_delete)
            .await?
        {
            Deletion::Deleted { objects } => {
                info!(%store, bucket = %m.name, owner, objects, "deleted an orphaned bucket (reclaim policy Delete recorded in its tags)");
                Ok(())
            }
            Deletion::AlreadyGone => Ok(()),
            Deletion::NotOurs(why) => Err(ProvisionError::permanent(format!(
                "bucket {} is kept: {why}",
                m.name
            ))),
        }
    }

    /// The admin client of a class that gives each owner a user of its
    /// own; a shared-admin class has none to list.
    fn listing_admin(
        &self,
        r: &Resolved,
        req: &InventoryRequest,
    ) -> Result<AdminClient, ProvisionError> {
        if r.params.credentials_mode != PER_CLAIM_MODE {
            return Err(ProvisionError::unsupported(format!(
                "{} {} hands out the store's admin key (credentialsMode {}): there are no users of its own to list",
                req.class_kind, req.class_name, r.params.credentials_mode
            )));
        }
        self.admin_clients
            .get(&r.admin.endpoint.url, &r.admin.region, &r.admin.credentials)
            .map_err(|e| ProvisionError::permanent(e.to_string()))
    }
}

/// The class as its requests name it.
fn class_name(req: &InventoryRequest) -> ClassName<'_> {
    match req.class_kind.as_str() {
        "BucketAccessClass" => ClassName::Access(&req.class_name),
        "BucketClass" => ClassName::Bucket(""),
        _ => ClassName::Bucket(&req.class_name),
    }
}

/// A listed name that is ours, with its owner if live.
fn push(made: &mut Vec<Made>, kind: MadeKind, store: &str, name: &str, ours: Ours) {
    match ours {
        Ours::No => {}
        Ours::For(uid) => made.push(Made::new(kind, store, name).owned_by(uid)),
        Ours::Orphan => made.push(Made::new(kind, store, name)),
    }
}

/// An admin failure while listing or removing: a store without the admin
/// API cannot be swept (said so), a passing failure is retried next sweep.
fn listing_error(e: AdminError, store: &str) -> ProvisionError {
    if e.is_retryable() {
        return ProvisionError::retryable(e.to_string()).with_source(e);
    }
    if e.is_denied() {
        return ProvisionError::permanent(format!(
            "{e}. The admin credentials may not list users on {store}: give the admin Secret a key with admin rights"
        ));
    }
    ProvisionError::unsupported(format!(
        "{e}. Listing users needs MinIO's admin API on {store} (MinIO, RustFS)"
    ))
}
