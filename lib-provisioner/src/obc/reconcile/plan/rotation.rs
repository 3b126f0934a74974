//! Rotating a Bound claim's credentials: new ones issued and recorded, the
//! Secret switched to them, the previous ones revoked, in that order.
//!
//! Which key a rotation replaces comes from the ObjectBucket's record of
//! the key the library gave the Secret ([`records::recorded_key`]), never
//! from the Secret, which its tenant can write: an older ObjectBucket
//! without that record first gets the provisioner's own answer recorded
//! (see `live_step`). The rotation under way and its previous key are
//! recorded before anything is issued; the new key is recorded before the
//! Secret is written. So every step is decided from what is recorded: the
//! record still the previous key, or the Secret not yet holding the
//! recorded one, means issue (again); otherwise revoke the previous, then
//! finish. A crash anywhere repeats one step.

use super::meta::annotation;
use super::{ClassState, Observed, Problem, Step, records};
use crate::obc::api::{
    ObjectBucket, ROTATE_ANNOTATION, ROTATED_ANNOTATION, ROTATION_PENDING_ANNOTATION,
    ROTATION_PREVIOUS_KEY_ANNOTATION,
};

/// The rotation asked for on the claim and neither done nor refused yet.
pub(crate) fn requested<'a>(o: &'a Observed, ob: &ObjectBucket) -> Option<&'a str> {
    let wanted = annotation(&o.claim.metadata, ROTATE_ANNOTATION)?;
    (annotation(&ob.metadata, ROTATED_ANNOTATION) != Some(wanted)).then_some(wanted)
}

/// Whether a rotation is asked for or under way: the executor then reads
/// the access key id the Secret holds (`Observed::secret_key_id`).
pub(crate) fn in_progress(o: &Observed, ob: &ObjectBucket) -> bool {
    annotation(&ob.metadata, ROTATION_PENDING_ANNOTATION).is_some() || requested(o, ob).is_some()
}

/// A rotation is asked for or under way on an ObjectBucket that does not
/// record the key its Secret was given (written by an older version), and
/// the provisioner can be asked for the claim's access (its class exists):
/// that access is obtained and recorded before the rotation starts.
pub(crate) fn needs_key_record(o: &Observed, ob: &ObjectBucket) -> bool {
    records::recorded_key(ob).is_none()
        && matches!(o.class, ClassState::Ours(_))
        && in_progress(o, ob)
}

/// The next step of a rotation, if one is asked for or under way.
pub(super) fn rotation_step(o: &Observed, ob: &ObjectBucket) -> Option<Step> {
    let pending = annotation(&ob.metadata, ROTATION_PENDING_ANNOTATION);
    let rotation = pending.or_else(|| requested(o, ob))?.to_owned();
    let Some(recorded) = records::recorded_key(ob) else {
        return Some(Step::EndRotation {
            rotation,
            problem: no_record(ob),
        });
    };
    let previous = pending.and_then(|_| annotation(&ob.metadata, ROTATION_PREVIOUS_KEY_ANNOTATION));
    let Some(previous) = previous.map(str::to_owned) else {
        return Some(Step::StartRotation {
            rotation,
            previous: recorded.to_owned(),
        });
    };
    // The Secret was written first (children come before this).
    if o.rotated_now
        && o.access
            .as_ref()
            .is_some_and(|a| a.credentials.access_key_id == previous)
    {
        return Some(Step::EndRotation {
            rotation,
            problem: key_id_unchanged(&previous),
        });
    }
    // Unknown until the Secret is read (it is, while a rotation is on).
    let current = o.secret_key_id.as_deref()?;
    if recorded == previous || current != recorded {
        return Some(Step::RotateCredentials { rotation, previous });
    }
    if o.revocation.is_none() {
        return Some(Step::RevokePreviousCredentials { rotation, previous });
    }
    Some(Step::FinishRotation { rotation, previous })
}

fn key_id_unchanged(previous: &str) -> Problem {
    Problem::new(
        "KeyIdUnchanged",
        format!(
            "the provisioner's rotate returned the previous access key id {previous:?} again, so the previous key cannot be revoked without cutting the claim off: nothing was revoked, and the Secret holds the secret rotate returned for that key. The provisioner's author must make rotate issue a new access key id (the previous one stays valid until revoke_previous_key); set a new value to try again after an upgrade"
        ),
    )
}

fn no_record(ob: &ObjectBucket) -> Problem {
    Problem::new(
        "RotationNeedsStorageClass",
        format!(
            "ObjectBucket {} does not record which access key its Secret was given (an older version bound it), and the claim's Secret cannot be trusted for that; the provisioner would re-issue the claim's access, but StorageClass {:?} is gone. Recreate the class, then set a new value to rotate",
            ob.metadata.name.as_deref().unwrap_or_default(),
            ob.spec.storage_class_name
        ),
    )
}
