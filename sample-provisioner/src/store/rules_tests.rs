//! The ownership rule tables, and model runs of interrupted and racing
//! provisions against them.

use super::*;
use std::collections::BTreeMap;

const UID: &str = "uid-a";
const OWNER: Owner<'static> = Owner {
    claim_uid: UID,
    claim: "ns/a",
    sweep: None,
};

#[test]
fn teardown_messages_say_how_to_fix_them() {
    let e = not_empty("photos-1");
    assert!(!e.is_retryable());
    assert_eq!(
        e.to_string(),
        "bucket photos-1 is not empty: empty it, or set forceDelete: \"true\" on the StorageClass"
    );
    let e = not_ours("photos-1", Some("uid-2"));
    assert!(!e.is_retryable());
    assert!(
        e.to_string()
            .contains("exists and was not created for this claim"),
        "{e}"
    );
    assert!(e.to_string().contains("uid-2"), "{e}");
    for e in [reserved("s"), denied("b"), unclaimed("b")] {
        assert!(!e.is_retryable(), "{e}");
    }
    assert!(reserved("s").to_string().contains("--state-bucket"));
    assert!(denied("b").to_string().contains("admin Secret"));
}

#[test]
fn refusals_are_permanent_and_say_why() {
    for (refusal, text) in [
        (Refusal::OtherClaim("uid-b".into()), "uid-b"),
        (Refusal::StateBucket, "state bucket"),
        (Refusal::Foreign, "was not created for this claim"),
        (Refusal::UnmarkedWithData, "was not created for this claim"),
        (Refusal::Unclaimed, "no creation intent"),
        (Refusal::WrittenBeforeMarked, "holding uid-a"),
    ] {
        let e = refusal.clone().into_error("b", &OWNER);
        assert!(!e.is_retryable(), "{refusal:?}");
        assert!(e.to_string().contains(text), "{refusal:?}: {e}");
    }
}

fn marked(uid: &str) -> Found {
    Found::Marked(uid.into())
}
const EMPTY: Found = Found::Unmarked { empty: true };
const DATA: Found = Found::Unmarked { empty: false };

#[test]
fn provision_rule_table() {
    use ProvisionStep::*;
    // (found, intent ours) -> step
    let table = [
        (Found::Absent, false, Create),
        (Found::Absent, true, Create),
        (marked(UID), false, Owned),
        (marked(UID), true, Owned),
        (
            marked("uid-b"),
            true,
            Refuse(Refusal::OtherClaim("uid-b".into())),
        ),
        (
            marked(STATE_BUCKET_MARKER),
            true,
            Refuse(Refusal::StateBucket),
        ),
        (Found::Foreign, true, Refuse(Refusal::Foreign)),
        (EMPTY, true, TakeOver(Basis::Intent)),
        // Whatever the claim says about the name (its generated-name
        // annotation, which its owner can write): not this claim's.
        (EMPTY, false, Refuse(Refusal::Unclaimed)),
        (DATA, true, Refuse(Refusal::WrittenBeforeMarked)),
        (DATA, false, Refuse(Refusal::UnmarkedWithData)),
    ];
    for (found, intent, step) in table {
        assert_eq!(
            provision_step(&found, UID, intent),
            step,
            "{found:?} intent={intent}"
        );
    }
}

#[test]
fn delete_rule_table() {
    use DeleteStep::*;
    let table = [
        (Found::Absent, true, Gone),
        (Found::Foreign, true, Denied),
        (marked(UID), false, Delete(Basis::Marker)),
        (
            marked("uid-b"),
            true,
            Keep(Kept::OtherClaim("uid-b".into())),
        ),
        (marked(STATE_BUCKET_MARKER), true, Keep(Kept::StateBucket)),
        (EMPTY, true, Delete(Basis::Intent)),
        (DATA, true, Delete(Basis::Intent)),
        // An empty bucket someone else made, that a claim names: kept.
        (EMPTY, false, Keep(Kept::Unmarked)),
        (DATA, false, Keep(Kept::Unmarked)),
    ];
    // The ObjectBucket's record vouches for an unmarked bucket, with or
    // without objects, and never outweighs another claim's marker.
    for (found, step) in [
        (DATA, Delete(Basis::ObjectBucket)),
        (EMPTY, Delete(Basis::ObjectBucket)),
        (
            Found::Marked("other".into()),
            Keep(Kept::OtherClaim("other".into())),
        ),
        (Found::Absent, DeleteStep::Gone),
    ] {
        assert_eq!(delete_step(&found, UID, false, true), step, "{found:?}");
    }
    for (found, intent, step) in table {
        assert_eq!(
            delete_step(&found, UID, intent, false),
            step,
            "{found:?} intent={intent}"
        );
    }
}

#[test]
fn refusals_say_nothing_was_created_unless_the_bucket_was_made_for_the_claim() {
    for refusal in [
        Refusal::OtherClaim("uid-b".into()),
        Refusal::StateBucket,
        Refusal::Foreign,
        Refusal::UnmarkedWithData,
        Refusal::Unclaimed,
    ] {
        let e = refusal.clone().into_error("b", &OWNER);
        assert!(e.nothing_created(), "{refusal:?}");
    }
    // Created for this claim (its intent), objects written since: the
    // library must keep its record of the bucket.
    let e = Refusal::WrittenBeforeMarked.into_error("b", &OWNER);
    assert!(!e.nothing_created());
}

/// An in-memory store: buckets (marker, object count) and intents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Table {
    buckets: BTreeMap<String, (Option<String>, usize)>,
    intents: BTreeMap<String, String>,
}

/// How a modelled attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// The process died after the write it was to die after.
    Crashed,
    /// Provisioned / deleted (or nothing to delete).
    Done,
    /// Retryable: another claim's creation is unfinished.
    Retry,
    /// Provision refused.
    Refused(Refusal),
    /// Delete kept the bucket.
    Kept(Kept),
}

/// Counts writes and says when the attempt dies.
struct Writes {
    done: usize,
    crash_after: Option<usize>,
}

impl Writes {
    fn new(crash_after: Option<usize>) -> Self {
        Self {
            done: 0,
            crash_after,
        }
    }

    /// Records a write; true if the process dies right after it.
    fn dies(&mut self) -> bool {
        self.done += 1;
        self.crash_after == Some(self.done - 1)
    }
}

impl Table {
    fn found(&self, bucket: &str) -> Found {
        match self.buckets.get(bucket) {
            None => Found::Absent,
            Some((Some(m), _)) => Found::Marked(m.clone()),
            Some((None, n)) => Found::Unmarked { empty: *n == 0 },
        }
    }

    fn intent_of(&self, bucket: &str, uid: &str) -> bool {
        self.intents.get(bucket).is_some_and(|u| u == uid)
    }

    /// One provision attempt, in the order of `Store::create_owned`,
    /// dying after write number `crash_after` (`None`: never).
    fn provision(&mut self, bucket: &str, uid: &str, crash_after: Option<usize>) -> Outcome {
        let mut w = Writes::new(crash_after);
        let mut found = self.found(bucket);
        let mut intent = self.intent_of(bucket, uid);
        if found == Found::Absent {
            // If-None-Match: *
            if !self.intents.contains_key(bucket) {
                self.intents.insert(bucket.into(), uid.into());
                if w.dies() {
                    return Outcome::Crashed;
                }
            }
            if !self.intent_of(bucket, uid) {
                return Outcome::Retry;
            }
            intent = true;
            self.buckets.entry(bucket.into()).or_insert((None, 0));
            if w.dies() {
                return Outcome::Crashed;
            }
            found = self.found(bucket);
        }
        let outcome = match provision_step(&found, uid, intent) {
            ProvisionStep::Create => unreachable!("the bucket exists now"),
            ProvisionStep::Owned => Outcome::Done,
            ProvisionStep::TakeOver(_) => {
                if let Some(b) = self.buckets.get_mut(bucket) {
                    b.0.get_or_insert_with(|| uid.to_owned());
                }
                if w.dies() {
                    return Outcome::Crashed;
                }
                match self.found(bucket) {
                    Found::Marked(m) if m == uid => Outcome::Done,
                    Found::Marked(m) => Outcome::Refused(Refusal::OtherClaim(m)),
                    other => unreachable!("{other:?}"),
                }
            }
            ProvisionStep::Refuse(r) => Outcome::Refused(r),
        };
        let keep = matches!(&outcome, Outcome::Refused(r) if r.keeps_intent());
        if intent && !keep {
            self.intents.remove(bucket);
            if w.dies() {
                return Outcome::Crashed;
            }
        }
        outcome
    }

    /// One forced delete attempt, in the order of `Store::delete_owned`.
    fn delete(&mut self, bucket: &str, uid: &str, crash_after: Option<usize>) -> Outcome {
        let mut w = Writes::new(crash_after);
        let found = self.found(bucket);
        let intent = self.intent_of(bucket, uid);
        let outcome = match delete_step(&found, uid, intent, false) {
            DeleteStep::Delete(_) => {
                self.buckets.remove(bucket);
                if w.dies() {
                    return Outcome::Crashed;
                }
                Outcome::Done
            }
            DeleteStep::Gone => Outcome::Done,
            DeleteStep::Keep(k) => Outcome::Kept(k),
            DeleteStep::Denied => unreachable!("no foreign buckets here"),
        };
        if intent {
            self.intents.remove(bucket);
            if w.dies() {
                return Outcome::Crashed;
            }
        }
        outcome
    }
}

/// A crash after each write of a provision (intent, CreateBucket,
/// marker, intent deleted) converges on the next attempt, for an exact
/// name (no generated-name rule); deleting the claim instead leaves
/// nothing, even if that is interrupted too; another claim asking for
/// the same name never gets the bucket.
#[test]
fn every_interrupted_provision_converges() {
    for crash_after in 0..4 {
        let mut t = Table::default();
        let first = t.provision("b", UID, Some(crash_after));
        assert_eq!(first, Outcome::Crashed, "write {crash_after}: {t:?}");
        let crashed = t.clone();

        let mut other = crashed.clone();
        let outcome = other.provision("b", "uid-b", None);
        assert_ne!(outcome, Outcome::Done, "write {crash_after}: {other:?}");

        assert_eq!(t.provision("b", UID, None), Outcome::Done);
        assert_eq!(t.found("b"), marked(UID), "write {crash_after}");
        assert!(t.intents.is_empty(), "write {crash_after}: {t:?}");
        assert_eq!(t.provision("b", UID, None), Outcome::Done);

        for delete_crash in [Some(0), Some(1), None] {
            let mut d = crashed.clone();
            if d.delete("b", UID, delete_crash) == Outcome::Crashed {
                assert_eq!(d.delete("b", UID, None), Outcome::Done);
            }
            assert_eq!(d, Table::default(), "write {crash_after}");
        }
    }
}

/// Two claims creating one exact name, each dying at any write: on
/// restart exactly one has the bucket, and no intent is left.
#[test]
fn racing_claims_with_crashes_end_with_one_owner() {
    for a_crash in 0..4 {
        for b_crash in 0..4 {
            let mut t = Table::default();
            t.provision("b", "uid-a", Some(a_crash));
            t.provision("b", "uid-b", Some(b_crash));
            let a = t.provision("b", "uid-a", None);
            let b = t.provision("b", "uid-b", None);
            let done = [&a, &b].iter().filter(|o| ***o == Outcome::Done).count();
            assert_eq!(done, 1, "crashes {a_crash}/{b_crash}: {a:?} {b:?} {t:?}");
            assert!(t.intents.is_empty(), "crashes {a_crash}/{b_crash}: {t:?}");
        }
    }
}

/// A bucket that existed before the claim (empty, unmarked): refused, and
/// no intent is written for it, so neither a retry nor the claim's deletion
/// touches it, whatever the claim says its name is (a generated-name
/// annotation its owner wrote: the hijack of issue 25). Left by a version
/// without intents: refused too, with a message saying to delete it.
#[test]
fn an_existing_unmarked_bucket_needs_an_intent() {
    let mut t = Table::default();
    t.buckets.insert("b".into(), (None, 0));
    let before = t.clone();
    assert_eq!(
        t.provision("b", UID, None),
        Outcome::Refused(Refusal::Unclaimed)
    );
    assert_eq!(t, before, "nothing written");
    assert_eq!(
        t.provision("b", UID, None),
        Outcome::Refused(Refusal::Unclaimed)
    );
    assert_eq!(t.delete("b", UID, None), Outcome::Kept(Kept::Unmarked));
    assert_eq!(t, before, "kept");

    // Holding data: never.
    let mut t = Table::default();
    t.buckets.insert("b".into(), (None, 3));
    assert_eq!(
        t.provision("b", UID, None),
        Outcome::Refused(Refusal::UnmarkedWithData)
    );
    assert_eq!(t.delete("b", UID, None), Outcome::Kept(Kept::Unmarked));
}

#[test]
fn a_record_naming_its_own_bucket_names_the_claim_in_the_id() {
    let uid = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
    let bucket = format!("bc-{uid}");
    // What earlier versions' gRPC path wrote: the whole id.
    assert_eq!(claim_uid_in_record(bucket.clone(), &bucket), uid);
    // What both modes write now, and every OBC record: the claim's UID.
    assert_eq!(claim_uid_in_record(uid.to_owned(), &bucket), uid);
    // Another bucket's id is another claim's, never this one's.
    let other = "bc-0b1f6c1e-2a3b-4c5d-8e9f-0123456789ac".to_owned();
    assert_eq!(claim_uid_in_record(other.clone(), &bucket), other);
    // A static bucket's record is what it says.
    assert_eq!(claim_uid_in_record("photos".into(), "photos"), "photos");
}
