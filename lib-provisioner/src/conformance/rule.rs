//! [`Rule`]: the parts of the provisioner contract the kit checks, each
//! with its section of `docs/provisioner-guide.md`.

/// Where the guide is published: the repository's copy, linked from every
/// report line so an author reads the rule next to the failure.
const GUIDE: &str = concat!(
    env!("CARGO_PKG_REPOSITORY"),
    "/blob/main/docs/provisioner-guide.md"
);

/// A rule of the provisioner contract.
///
/// ```
/// use lib_provisioner::conformance::Rule;
/// assert!(Rule::Repeat.link().ends_with("provisioner-guide.md#calls-repeat"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// Every method may be called again for the same claim and must then
    /// succeed with the same result.
    Repeat,
    /// A call may be dropped at any `.await` (the library's timeout, a
    /// crash); the next call must converge.
    Abandon,
    /// Teardown of a bucket or access that is gone (or never was) succeeds.
    GoneIsDone,
    /// A bucket that is not the claim's is refused, and never deleted.
    Ownership,
    /// Credentials reach only the claim's bucket, with the access asked for.
    Scope,
    /// Teardown leaves nothing: no bucket under Delete, no working
    /// credentials under Retain.
    Teardown,
    /// Bucket settings a claim asks for are on the store after every
    /// provisioning attempt, follow its updates, and are left alone by a
    /// re-issue.
    BucketSettings,
}

impl Rule {
    /// What the contract says, in one sentence.
    pub fn text(self) -> &'static str {
        match self {
            Self::Repeat => {
                "every method may be called again for the same claim (after a crash, a conflict, a retry) and must then succeed with the same result, never failing because its own earlier work exists, never making a second bucket"
            }
            Self::Abandon => {
                "every call runs under a timeout and may be dropped at any .await; the next call for the claim must converge to the same result"
            }
            Self::GoneIsDone => {
                "delete, revoke and revoke_previous_key of what is already gone (or was never made) return Ok"
            }
            Self::Ownership => {
                "a bucket that exists and was not created for this claim is refused with a permanent error, and teardown of another claim never removes it; grant refuses a bucket that does not exist"
            }
            Self::Scope => {
                "a claim's credentials reach only its own bucket, and read-only credentials cannot write"
            }
            Self::Teardown => {
                "delete removes the bucket and the claim's credentials; revoke removes the credentials and keeps the bucket"
            }
            Self::BucketSettings => {
                "the bucket settings a claim's additionalConfig asks for are on the store after provisioning and every retry of it, an update replaces or removes them (idempotently: a repeat changes nothing), and a re-issue of credentials never touches them"
            }
        }
    }

    /// The anchor of the rule's section in the guide.
    pub fn anchor(self) -> &'static str {
        match self {
            Self::Repeat => "calls-repeat",
            Self::Abandon => "calls-can-be-abandoned",
            Self::GoneIsDone => "teardown-of-what-is-gone-succeeds",
            Self::Ownership => "refuse-what-is-not-the-claims",
            Self::Scope => "credentials-reach-only-the-claims-bucket",
            Self::Teardown => "teardown-leaves-nothing",
            Self::BucketSettings => "bucket-settings-follow-the-claim",
        }
    }

    /// The guide's section on this rule.
    pub fn link(self) -> String {
        format!("{GUIDE}#{}", self.anchor())
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.anchor())
    }
}
