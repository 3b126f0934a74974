//! Rotating a Bound claim's credentials: new ones issued, the Secret
//! switched to them, the previous ones revoked, in that order.
//!
//! The rotation under way and the key it replaces are recorded on the
//! ObjectBucket before anything is issued, so every step is decided from
//! what is recorded and what the Secret holds: before the switch the Secret
//! still holds the previous key (issue again), after it a new one (revoke
//! the previous, then finish). A crash anywhere repeats one step.

use super::meta::annotation;
use super::{Observed, Step};
use crate::api::{
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

/// The next step of a rotation, if one is asked for or under way.
pub(super) fn rotation_step(o: &Observed, ob: &ObjectBucket) -> Option<Step> {
    let pending = annotation(&ob.metadata, ROTATION_PENDING_ANNOTATION);
    let rotation = pending.or_else(|| requested(o, ob))?.to_owned();
    // Unknown until the Secret is read (it is, when this returns Some).
    let current = o.secret_key_id.as_deref()?;
    let previous = pending.and_then(|_| annotation(&ob.metadata, ROTATION_PREVIOUS_KEY_ANNOTATION));
    let Some(previous) = previous.map(str::to_owned) else {
        return Some(Step::StartRotation {
            rotation,
            previous: current.to_owned(),
        });
    };
    if current == previous {
        return Some(Step::RotateCredentials { rotation, previous });
    }
    if !o.previous_revoked {
        return Some(Step::RevokePreviousCredentials { rotation, previous });
    }
    Some(Step::FinishRotation { rotation })
}
