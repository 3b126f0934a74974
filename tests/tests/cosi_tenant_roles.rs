//! COSI's user kinds through Kubernetes' own user-facing roles, tried as a
//! tenant: `deploy/tenant-roles.yaml` aggregates BucketClaims and
//! BucketAccesses to `admin`, `edit` and `view`, and nothing else of COSI.
//! A user bound to `edit` in one namespace (a client certificate, not the
//! admin) creates and deletes both kinds there; the controllers' status,
//! the cluster-scoped Buckets and classes, and other namespaces stay out of
//! reach; `view` reads them only. Both asked of the apiserver's authorizer
//! (SubjectAccessReview) and tried with real requests, with the ClusterRole
//! aggregation controller running as in a real cluster.

use std::time::Duration;

use kube::Client;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use obc_tests::cosi_e2e::{Kind, api, claim_of_class, create, install_cosi_crds, object};
use obc_tests::rbac::{Subject, allowed};
use obc_tests::setup::{install_crds, repo_file};
use obc_tests::testenv::Store;
use obc_tests::{TestEnv, wait_for};
use serde_json::json;

const T: Duration = Duration::from_secs(60);
const TEAM: &str = "team-a";
const OTHER: &str = "team-b";
const EDITOR: &str = "alice";
const VIEWER: &str = "victor";
const GROUP: &str = "objectstorage.k8s.io";
const USER_KINDS: [&str; 2] = ["bucketclaims", "bucketaccesses"];
const WRITE: [&str; 4] = ["create", "update", "patch", "delete"];
const READ: [&str; 3] = ["get", "list", "watch"];

fn is_forbidden<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_and_view_reach_bucket_claims_and_accesses_in_their_namespace_only() {
    let env = TestEnv::start_with(Store::None).await.expect("env");
    install_crds(&env).await.expect("OBC CRDs");
    install_cosi_crds(&env).await.expect("crds/cosi/");
    env.apply_yaml(&repo_file("deploy/tenant-roles.yaml").expect("file"))
        .await
        .expect("deploy/tenant-roles.yaml");
    env.start_controller_manager()
        .await
        .expect("kube-controller-manager (ClusterRole aggregation)");
    for ns in [TEAM, OTHER] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    bind_tenants(&env).await;
    let admin = env.admin_client();
    let (alice, victor) = (Subject::user(EDITOR), Subject::user(VIEWER));
    let may = |who: &Subject, verb: &str, resource: &str, ns: Option<&str>| {
        let (admin, who) = (admin.clone(), who.clone());
        let (verb, resource, ns) = (verb.to_owned(), resource.to_owned(), ns.map(str::to_owned));
        async move {
            allowed(&admin, &who, &verb, GROUP, &resource, ns.as_deref())
                .await
                .expect("SubjectAccessReview")
        }
    };
    let mut wrong = Vec::new();
    for resource in USER_KINDS {
        for verb in WRITE.iter().chain(READ.iter()) {
            if !may(&alice, verb, resource, Some(TEAM)).await {
                wrong.push(format!("edit may not {verb} {resource} in {TEAM}"));
            }
            if may(&alice, verb, resource, Some(OTHER)).await {
                wrong.push(format!("edit in {TEAM} may {verb} {resource} in {OTHER}"));
            }
            let viewer = may(&victor, verb, resource, Some(TEAM)).await;
            if viewer != READ.contains(verb) {
                wrong.push(format!(
                    "view: {verb} {resource} in {TEAM} allowed: {viewer}"
                ));
            }
        }
        for verb in ["update", "patch"] {
            let status = format!("{resource}/status");
            if may(&alice, verb, &status, Some(TEAM)).await {
                wrong.push(format!("edit may {verb} {status} (the controllers' alone)"));
            }
        }
    }
    for resource in ["buckets", "bucketclasses", "bucketaccessclasses"] {
        for verb in READ.iter().chain(WRITE.iter()) {
            for who in [&alice, &victor] {
                if may(who, verb, resource, None).await
                    || may(who, verb, resource, Some(TEAM)).await
                {
                    wrong.push(format!(
                        "{} may {verb} {resource} (cluster-scoped)",
                        who.user
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");

    let alice = env.user_client(EDITOR, TEAM).await.expect("alice");
    let victor = env.user_client(VIEWER, TEAM).await.expect("victor");
    editor_uses_claims_and_accesses(&alice).await;
    viewer_only_reads(&victor).await;
}

/// What a cluster administrator does for a namespace's users: RoleBindings
/// to Kubernetes' own `edit` and `view`; waits until the aggregation
/// controller has added COSI's kinds to them.
async fn bind_tenants(env: &TestEnv) {
    let binding = |user: &str, role: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {user}-{role}, namespace: {TEAM}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        )
    };
    env.apply_yaml(&format!(
        "{}---\n{}",
        binding(EDITOR, "edit"),
        binding(VIEWER, "view")
    ))
    .await
    .expect("RoleBindings");
    let admin = env.admin_client();
    for (user, verb, role) in [(EDITOR, "create", "edit"), (VIEWER, "list", "view")] {
        let who = Subject::user(user);
        for resource in USER_KINDS {
            wait_for(
                T,
                format!("{user} ({role}) may {verb} {resource}"),
                || async {
                    let may = allowed(&admin, &who, verb, GROUP, resource, Some(TEAM));
                    Ok(may.await?.then_some(()))
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{e:#}: COSI's kinds are not aggregated to {role}"));
        }
    }
}

/// As the editor: creates, lists and deletes a BucketClaim and a
/// BucketAccess in [`TEAM`]; may not write their status, read Buckets, or
/// touch [`OTHER`].
async fn editor_uses_claims_and_accesses(alice: &Client) {
    create(
        alice,
        Kind::BucketClaim,
        TEAM,
        "mine",
        claim_of_class("sample-s3"),
    )
    .await
    .expect("alice (edit) creates a BucketClaim");
    let access = obc_tests::cosi_e2e::access_of("sample-s3", &[("mine", "ReadWrite", "mine-keys")]);
    create(alice, Kind::BucketAccess, TEAM, "mine", access.clone())
        .await
        .expect("alice (edit) creates a BucketAccess");
    for kind in [Kind::BucketClaim, Kind::BucketAccess] {
        let own = api(alice, kind, TEAM);
        own.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("alice lists {kind:?}s: {e}"));
        let forged = json!({"status": {"readyToUse": true, "boundBucketName": "bc-someone-else"}});
        let r = own
            .patch_status("mine", &PatchParams::default(), &Patch::Merge(&forged))
            .await;
        assert!(
            is_forbidden(&r),
            "alice patches her {kind:?}'s status: {r:?}"
        );
        let other = api(alice, kind, OTHER);
        assert!(
            is_forbidden(&other.list(&ListParams::default()).await),
            "alice lists {kind:?}s in {OTHER}"
        );
        let body = if kind == Kind::BucketClaim {
            claim_of_class("sample-s3")
        } else {
            access.clone()
        };
        let elsewhere = object(kind, "elsewhere", body).expect("object");
        assert!(
            is_forbidden(&other.create(&PostParams::default(), &elsewhere).await),
            "alice creates a {kind:?} in {OTHER}"
        );
    }
    for kind in [Kind::Bucket, Kind::BucketClass, Kind::BucketAccessClass] {
        let r = api(alice, kind, TEAM).list(&ListParams::default()).await;
        assert!(is_forbidden(&r), "alice lists {kind:?}s: {r:?}");
    }
    for kind in [Kind::BucketAccess, Kind::BucketClaim] {
        api(alice, kind, TEAM)
            .delete("mine", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("alice deletes her {kind:?}: {e}"));
    }
}

/// As the viewer: lists both kinds in [`TEAM`], creates neither.
async fn viewer_only_reads(victor: &Client) {
    for kind in [Kind::BucketClaim, Kind::BucketAccess] {
        let own = api(victor, kind, TEAM);
        own.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("victor (view) lists {kind:?}s: {e}"));
        let body = if kind == Kind::BucketClaim {
            claim_of_class("sample-s3")
        } else {
            obc_tests::cosi_e2e::access_of("sample-s3", &[("mine", "ReadOnly", "keys")])
        };
        let o = object(kind, "viewers", body).expect("object");
        assert!(
            is_forbidden(&own.create(&PostParams::default(), &o).await),
            "victor (view) creates a {kind:?}"
        );
    }
}
