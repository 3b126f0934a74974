//! The steps the plan chooses from, and what each needs when a write of it
//! conflicts with another writer.

use super::{Problem, records};
use crate::obc::api::{BucketOrigin, ReclaimPolicy};

/// The step to take next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not this provisioner's claim: touch nothing.
    Ignore,
    /// The claim is invalid: mark it Failed and stop.
    Reject(Problem),
    /// The claim waits for something outside it: mark it Pending and retry.
    Wait(Problem),
    /// Record on a new claim the ObjectBucket name chosen for it, because
    /// `obc-<ns>-<name>` is taken by another claim or too long. Nothing
    /// exists for the claim yet; every later step uses the recorded name.
    NameObjectBucket { name: String },
    /// Add the finalizer and label, and persist a generated bucket name, in
    /// one patch: nothing is created before the claim is protected and its
    /// name fixed. A claim protected for the first time also gets
    /// `spec.objectBucketName` (`bind_to`) in that patch: the ObjectBucket
    /// it binds to is known before anything exists, and recording it then
    /// saves the later claim write older versions made at bind.
    PrepareClaim {
        generate_from: Option<String>,
        bind_to: Option<String>,
    },
    /// Take the record of a greenfield bucket name that the apiserver lets
    /// only one claim create (a Lease in the provisioner's namespace), or
    /// confirm this claim holds it: before anything is reserved or
    /// provisioned. Held by another live claim: the claim is rejected.
    HoldBucketName { bucket_name: String },
    /// Let go of the claim's bucket name record: the last writes of a
    /// deletion, after the teardown.
    ReleaseBucketName { bucket_name: String },
    /// Create the ObjectBucket `obc-<ns>-<name>`: from the obtained access,
    /// or, in the pass that added the finalizer, reserved (no endpoint yet)
    /// before the provisioner is called, as the durable record outside the
    /// claim that a bucket may exist for it.
    CreateObjectBucket {
        bucket_name: String,
        origin: BucketOrigin,
        reclaim_policy: ReclaimPolicy,
    },
    /// Ask the provisioner for the bucket (greenfield) or access (brownfield).
    ObtainAccess {
        bucket_name: String,
        origin: BucketOrigin,
    },
    /// Record the provisioner's endpoint and state on the reserved
    /// ObjectBucket, and lift the reservation.
    CompleteObjectBucket,
    /// Write on an ObjectBucket the records it lacks (written by an older
    /// version): class parameters, applied config.
    RecordObjectBucket { records: records::Records },
    /// Take over an ObjectBucket bound to this claim that lacks our label,
    /// finalizer or origin annotation (written by the Go library or an
    /// older version). The origin annotation is written when known.
    AdoptObjectBucket { origin: Option<BucketOrigin> },
    /// Record on the ObjectBucket, before the Secret is written with the
    /// access obtained in this pass, its access key id and the provisioner's
    /// state (replacing the recorded state); an older ObjectBucket's
    /// rotation under way, whose previous key came from the Secret, is
    /// dropped in the same patch (it starts again from this record).
    RecordAccess,
    /// Create the Secret and the ConfigMap side by side: both are missing
    /// (a new claim, or both deleted). They are independent objects, and
    /// either one without the other is a state a failed write already
    /// leaves, so nothing waits for the first before sending the second.
    WriteChildren,
    /// Create the Secret, or make its data match freshly obtained access.
    WriteSecret,
    /// Give an existing Secret of this claim our label and finalizer.
    AdoptSecret,
    /// Create the ConfigMap, or make it match the ObjectBucket's endpoint.
    WriteConfigMap,
    /// Give an existing ConfigMap of this claim our label and finalizer.
    AdoptConfigMap,
    /// Record `spec.objectBucketName` on a claim prepared without it (by an
    /// older version, or the Go library under a schema that pruned it).
    BindClaim,
    /// Set the ObjectBucket's status phase to Bound.
    MarkObjectBucketBound,
    /// Record on the ObjectBucket the rotation asked for and the access key
    /// it replaces, before anything is issued.
    StartRotation { rotation: String, previous: String },
    /// Ask the provisioner for new credentials (the Secret still holds the
    /// previous ones); the Secret is written with them next.
    RotateCredentials { rotation: String, previous: String },
    /// The Secret holds the new credentials: revoke the previous ones.
    RevokePreviousCredentials { rotation: String, previous: String },
    /// Tell the claim what became of the previous key, then record the
    /// rotation as done.
    FinishRotation { rotation: String, previous: String },
    /// End a rotation that cannot be done, saying why on the claim
    /// (`CredentialsRotated=False`), and record it so it is not asked again.
    EndRotation { rotation: String, problem: Problem },
    /// Apply a Bound claim's changed `additionalConfig` (the provisioner's
    /// `update`), then record it as applied on the ObjectBucket.
    UpdateBucket,
    /// Compare the bucket with the config recorded as applied (the
    /// provisioner's `check_config`), putting back what was changed on the
    /// store: due once per check interval.
    CheckConfig,
    /// Set the claim's status to Bound, for the generation applied.
    MarkClaimBound,
    /// Call Delete (or Revoke) for a claim being deleted.
    Teardown { delete_bucket: bool },
    /// Reclaim policy Delete: remove the ObjectBucket's finalizer and delete it.
    DeleteObjectBucket,
    /// Reclaim policy Retain: mark the ObjectBucket Released, drop its finalizer.
    ReleaseObjectBucket,
    /// Remove the Secret's finalizer and delete it.
    ReleaseSecret,
    /// Remove the ConfigMap's finalizer and delete it.
    ReleaseConfigMap,
    /// Remove the claim's finalizer: the last write of a deletion.
    RemoveClaimFinalizer,
    /// Nothing left to do.
    Done,
}

impl Step {
    /// Whether the step writes the claim (and its Events) and nothing else:
    /// then a conflict can only be on the claim, and the pass's own copies
    /// of the other objects are still what it last wrote or read.
    pub(crate) fn writes_only_the_claim(&self) -> bool {
        // Exhaustive on purpose: a new step must say which conflict
        // recovery it needs.
        match self {
            Step::Reject(_)
            | Step::Wait(_)
            | Step::PrepareClaim { .. }
            | Step::NameObjectBucket { .. }
            | Step::BindClaim
            | Step::CheckConfig
            | Step::MarkClaimBound
            | Step::RemoveClaimFinalizer => true,
            Step::Ignore
            | Step::HoldBucketName { .. }
            | Step::ReleaseBucketName { .. }
            | Step::CreateObjectBucket { .. }
            | Step::ObtainAccess { .. }
            | Step::CompleteObjectBucket
            | Step::AdoptObjectBucket { .. }
            | Step::RecordObjectBucket { .. }
            | Step::WriteChildren
            | Step::WriteSecret
            | Step::AdoptSecret
            | Step::WriteConfigMap
            | Step::AdoptConfigMap
            | Step::MarkObjectBucketBound
            | Step::UpdateBucket
            | Step::StartRotation { .. }
            | Step::RotateCredentials { .. }
            | Step::RevokePreviousCredentials { .. }
            | Step::FinishRotation { .. }
            | Step::EndRotation { .. }
            | Step::RecordAccess
            | Step::Teardown { .. }
            | Step::DeleteObjectBucket
            | Step::ReleaseObjectBucket
            | Step::ReleaseSecret
            | Step::ReleaseConfigMap
            | Step::Done => false,
        }
    }
}
