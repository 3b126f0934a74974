//! Which store users and policies this provisioner made, told from their
//! names alone, and for which owner ([`MadeNames`]): what the store sweep
//! lists. Pure; the names are `super::per_claim`'s and
//! [`super::per_principal`]'s, derived from the owner's UID, so an owner is
//! found by deriving every live owner's names and looking the listed name
//! up (COSI's are a digest and cannot be read back).

use std::collections::{BTreeSet, HashMap};

use super::per_claim::{policy_name, rotated_user_name, user_name};
use super::per_principal::{principal_policy_name, principal_user_name};

/// Which family's names a class's store is listed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// A StorageClass: claims' users (`obc…`) and policies (`obc-claim-…`).
    Claims,
    /// A BucketAccessClass: principals' users (`cosi…`) and policies
    /// (`cosi-access-…`).
    Principals,
    /// A BucketClass: buckets only.
    Buckets,
}

impl Family {
    /// The family of a class of `kind` (an unknown kind lists nothing of
    /// users: only what the class serves is listed).
    pub fn of(kind: &str) -> Self {
        match kind {
            "StorageClass" => Self::Claims,
            "BucketAccessClass" => Self::Principals,
            _ => Self::Buckets,
        }
    }
}

/// Names made for the live owners, with the owner each was made for.
#[derive(Debug, Default)]
pub struct MadeNames {
    owners: HashMap<String, String>,
}

/// What a listed name is to this provisioner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ours {
    /// Not one of its names: an administrator's, another tool's.
    No,
    /// One of its names, made for the live owner with this UID.
    For(String),
    /// One of its names, made for an owner that is not live.
    Orphan,
}

impl MadeNames {
    /// Every name the provisioner gives each of `owners` (a claim's two
    /// users and policy; a principal's user and policy, by its UID and by
    /// the `ba-<UID>` account name the COSI gRPC path derives them from).
    pub fn new(owners: &BTreeSet<String>) -> Self {
        let mut names = HashMap::new();
        for uid in owners {
            let account = format!("ba-{uid}");
            for name in [
                user_name(uid),
                rotated_user_name(uid),
                policy_name(uid),
                principal_user_name(uid),
                principal_policy_name(uid),
                principal_user_name(&account),
                principal_policy_name(&account),
            ] {
                names.insert(name, uid.clone());
            }
        }
        Self { owners: names }
    }

    /// What user `name` is, listed through a class of `family`.
    pub fn user(&self, family: Family, name: &str) -> Ours {
        let shaped = match family {
            Family::Claims => is_claim_user(name),
            Family::Principals => is_principal_user(name),
            Family::Buckets => false,
        };
        self.owner_of(shaped, name)
    }

    /// What canned policy `name` is, listed through a class of `family`.
    pub fn policy(&self, family: Family, name: &str) -> Ours {
        let shaped = match family {
            Family::Claims => name.strip_prefix("obc-claim-").is_some_and(|uid| {
                !uid.is_empty() && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
            }),
            Family::Principals => name
                .strip_prefix("cosi-access-")
                .is_some_and(|d| is_lower_hex(d, 32)),
            Family::Buckets => false,
        };
        self.owner_of(shaped, name)
    }

    fn owner_of(&self, shaped: bool, name: &str) -> Ours {
        match (shaped, self.owners.get(name)) {
            (false, _) => Ours::No,
            (true, Some(uid)) => Ours::For(uid.clone()),
            (true, None) => Ours::Orphan,
        }
    }
}

/// `obc` and 17 hex digits ([`user_name`]), or 16 and `r`
/// ([`rotated_user_name`]).
pub fn is_claim_user(name: &str) -> bool {
    name.strip_prefix("obc").is_some_and(|rest| {
        is_lower_hex(rest, 17) || rest.strip_suffix('r').is_some_and(|h| is_lower_hex(h, 16))
    })
}

/// `cosi` and 16 hex digits ([`principal_user_name`]).
pub fn is_principal_user(name: &str) -> bool {
    name.strip_prefix("cosi")
        .is_some_and(|rest| is_lower_hex(rest, 16))
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";

    #[test]
    fn a_live_owners_names_are_found_with_their_owner() {
        let names = MadeNames::new(&BTreeSet::from([UID.to_owned()]));
        let owned = Ours::For(UID.to_owned());
        assert_eq!(names.user(Family::Claims, &user_name(UID)), owned);
        assert_eq!(names.user(Family::Claims, &rotated_user_name(UID)), owned);
        assert_eq!(names.policy(Family::Claims, &policy_name(UID)), owned);
        assert_eq!(
            names.user(Family::Principals, &principal_user_name(UID)),
            owned
        );
        let account = format!("ba-{UID}");
        assert_eq!(
            names.user(Family::Principals, &principal_user_name(&account)),
            owned
        );
        assert_eq!(
            names.policy(Family::Principals, &principal_policy_name(UID)),
            owned
        );
    }

    #[test]
    fn names_of_a_gone_owner_are_orphans_and_others_are_not_ours() {
        let names = MadeNames::new(&BTreeSet::new());
        assert_eq!(names.user(Family::Claims, &user_name(UID)), Ours::Orphan);
        assert_eq!(
            names.user(Family::Principals, &principal_user_name(UID)),
            Ours::Orphan
        );
        assert_eq!(
            names.policy(Family::Principals, &principal_policy_name(UID)),
            Ours::Orphan
        );
        for foreign in [
            "admin",
            "obcadmin-of-the-team",
            "cosi-tools",
            "obc0b1f6c1e2a3b4c5dX",
            "readwrite",
        ] {
            assert_eq!(names.user(Family::Claims, foreign), Ours::No, "{foreign}");
            assert_eq!(
                names.user(Family::Principals, foreign),
                Ours::No,
                "{foreign}"
            );
            assert_eq!(names.policy(Family::Claims, foreign), Ours::No, "{foreign}");
        }
    }

    #[test]
    fn a_class_lists_only_its_familys_names() {
        let names = MadeNames::new(&BTreeSet::new());
        assert_eq!(names.user(Family::Principals, &user_name(UID)), Ours::No);
        assert_eq!(
            names.user(Family::Claims, &principal_user_name(UID)),
            Ours::No
        );
        assert_eq!(names.user(Family::Buckets, &user_name(UID)), Ours::No);
        assert_eq!(
            names.policy(Family::Principals, &policy_name(UID)),
            Ours::No
        );
    }
}
