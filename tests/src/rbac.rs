//! RBAC held against what was done: the grants a set of manifests gives a
//! ServiceAccount (its Roles and ClusterRoles, through the bindings that name
//! it), and the requests the apiserver's audit log recorded for it. A denied
//! request is a missing permission; a grant no request used (and not listed
//! as needed on paths the scenario does not take) is a surplus one.
//!
//! `deploy/rbac.yaml` (`tests/tests/sample.rs`, `tests/tests/tenant_roles.rs`)
//! and the Helm chart's rendered RBAC (`tests/tests/chart.rs`) are checked
//! this way. [`allowed`] asks the apiserver itself (a SubjectAccessReview)
//! whether someone may do something.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use serde::Deserialize as _;

/// Where a grant holds: everywhere (a ClusterRole bound by a
/// ClusterRoleBinding) or in one namespace (a RoleBinding).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Every namespace, and cluster-scoped objects.
    Cluster,
    /// One namespace.
    Namespace(String),
}

/// One verb on one resource (`resource/subresource`) of one API group, in a
/// scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// Where it holds.
    pub scope: Scope,
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource, with `/subresource` if any.
    pub resource: String,
    /// Verb.
    pub verb: String,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match &self.scope {
            Scope::Cluster => "cluster-wide".to_owned(),
            Scope::Namespace(ns) => format!("in {ns}"),
        };
        write!(f, "{} {}/{} {scope}", self.verb, self.group, self.resource)
    }
}

/// A request the audit log recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// The namespace of the object (`None`: cluster-scoped, or a request
    /// across all namespaces).
    pub namespace: Option<String>,
    /// API group.
    pub group: String,
    /// Resource, with `/subresource` if any.
    pub resource: String,
    /// Verb.
    pub verb: String,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.namespace.as_deref().unwrap_or("(all namespaces)");
        write!(f, "{} {}/{} in {ns}", self.verb, self.group, self.resource)
    }
}

impl Grant {
    /// Whether this grant allows `request` (resource names are not checked).
    pub fn covers(&self, request: &Request) -> bool {
        self.group == request.group
            && self.resource == request.resource
            && self.verb == request.verb
            && match (&self.scope, &request.namespace) {
                (Scope::Cluster, _) => true,
                (Scope::Namespace(ns), Some(r)) => ns == r,
                (Scope::Namespace(_), None) => false,
            }
    }
}

/// Someone the apiserver authenticated: a user name and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// User name.
    pub user: String,
    /// Groups (besides those a SubjectAccessReview adds nothing).
    pub groups: Vec<String>,
}

impl Subject {
    /// The ServiceAccount `namespace/name`, with the groups the apiserver
    /// gives its tokens.
    pub fn service_account(namespace: &str, name: &str) -> Subject {
        Subject {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
        }
    }

    /// A user authenticated by a client certificate without groups.
    pub fn user(name: &str) -> Subject {
        Subject {
            user: name.to_owned(),
            groups: vec!["system:authenticated".to_owned()],
        }
    }
}

/// Whether the apiserver's authorizer lets `who` `verb` the `resource`
/// (`resource` or `resource/subresource`) of API `group` in `namespace`
/// (`None`: cluster-scoped, or all namespaces): a SubjectAccessReview, made
/// by `admin`. What `kubectl auth can-i --as` asks.
pub async fn allowed(
    admin: &Client,
    who: &Subject,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, sub)) => (r, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(who.user.clone()),
            groups: Some(who.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                namespace: namespace.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .with_context(|| format!("SubjectAccessReview for {}", who.user))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Permissions the code needs on paths the end-to-end scenarios do not
/// take, and why: (API group, resource, verb, reason).
pub const NEEDED_BUT_NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "secrets",
        "update",
        "credentials rotated in place when a provisioner returns new ones",
    ),
    (
        "",
        "configmaps",
        "update",
        "endpoint changes rewritten in place",
    ),
    (
        "",
        "secrets",
        "patch",
        "a Secret an older version wrote loses the finalizer when adopted or released",
    ),
    (
        "",
        "configmaps",
        "patch",
        "a ConfigMap an older version wrote loses the finalizer when adopted or released",
    ),
    (
        "events.k8s.io",
        "events",
        "patch",
        "a repeated event is folded into a series",
    ),
    (
        "objectbucket.io",
        "objectbucketclaims",
        "get",
        "the ObjectBucket reconciler reads a claim missing from its cache",
    ),
];

fn strings(v: &serde_yaml::Value) -> Vec<String> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// What the manifests in `yaml` (one or more documents) grant the
/// ServiceAccount `namespace/name`: the rules of each Role and ClusterRole
/// a binding naming it refers to. A binding to a role the manifests do not
/// define is an error (the grant could not be checked).
pub fn grants_of(yaml: &str, namespace: &str, name: &str) -> Result<BTreeSet<Grant>> {
    let mut roles: BTreeMap<(Option<String>, String), Vec<serde_yaml::Value>> = BTreeMap::new();
    let mut bindings = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v = serde_yaml::Value::deserialize(doc).context("RBAC YAML")?;
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        let meta_name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let meta_ns = v["metadata"]["namespace"].as_str().map(str::to_owned);
        match kind.as_str() {
            "ClusterRole" => {
                let rules = v["rules"].as_sequence().cloned().unwrap_or_default();
                roles.insert((None, meta_name), rules);
            }
            "Role" => {
                let ns = meta_ns.with_context(|| format!("Role {meta_name} has no namespace"))?;
                let rules = v["rules"].as_sequence().cloned().unwrap_or_default();
                roles.insert((Some(ns), meta_name), rules);
            }
            "ClusterRoleBinding" | "RoleBinding" => bindings.push(v),
            _ => {}
        }
    }
    let mut grants = BTreeSet::new();
    for b in &bindings {
        let names_it = b["subjects"].as_sequence().into_iter().flatten().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == namespace
        });
        if !names_it {
            continue;
        }
        let role_kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = b["roleRef"]["name"].as_str().unwrap_or_default().to_owned();
        let binding_ns = b["metadata"]["namespace"].as_str().map(str::to_owned);
        let (key, scope) = match (b["kind"].as_str(), role_kind) {
            (Some("ClusterRoleBinding"), "ClusterRole") => ((None, role_name), Scope::Cluster),
            (Some("RoleBinding"), "ClusterRole") => (
                (None, role_name),
                Scope::Namespace(
                    binding_ns
                        .clone()
                        .context("a RoleBinding without namespace")?,
                ),
            ),
            (Some("RoleBinding"), "Role") => {
                let ns = binding_ns.context("a RoleBinding without namespace")?;
                ((Some(ns.clone()), role_name), Scope::Namespace(ns))
            }
            (kind, role) => bail!("unexpected binding {kind:?} of a {role}"),
        };
        let rules = roles.get(&key).with_context(|| {
            format!("a binding refers to {role_kind} {key:?}, not in the manifests")
        })?;
        for rule in rules {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        grants.insert(Grant {
                            scope: scope.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                        });
                    }
                }
            }
        }
    }
    Ok(grants)
}

/// The requests of `user` in the audit log at `path`: those answered, and
/// those denied (HTTP 403).
pub fn audited_requests(path: &Path, user: &str) -> Result<(BTreeSet<Request>, Vec<Request>)> {
    let mut used = BTreeSet::new();
    let mut denied = Vec::new();
    for e in audit_events(path, 0, user)? {
        // A request for no object (discovery: /apis/<group>/<version>,
        // /version) is a non-resource URL, which Kubernetes' own
        // system:discovery role lets every authenticated user read; no
        // manifest of ours grants or could narrow it. Refused, it still
        // counts as denied.
        if e["objectRef"].is_null() && e["responseStatus"]["code"] != 403 {
            continue;
        }
        let request = request_of(&e);
        if e["responseStatus"]["code"] == 403 {
            denied.push(request);
        } else {
            used.insert(request);
        }
    }
    Ok((used, denied))
}

/// The lines the audit log at `path` holds now: where a later
/// [`requests_after`] starts.
pub fn audit_mark(path: &Path) -> Result<usize> {
    let log = std::fs::read_to_string(path)
        .with_context(|| format!("reading the audit log {}", path.display()))?;
    Ok(log.lines().count())
}

/// The requests of `user` in the audit log at `path` after its first
/// `skip` lines (an [`audit_mark`]), in order.
pub fn requests_after(path: &Path, skip: usize, user: &str) -> Result<Vec<Request>> {
    Ok(audit_events(path, skip, user)?
        .iter()
        .map(request_of)
        .collect())
}

/// The audit events of `user` after the first `skip` lines.
fn audit_events(path: &Path, skip: usize, user: &str) -> Result<Vec<serde_json::Value>> {
    let log = std::fs::read_to_string(path)
        .with_context(|| format!("reading the audit log {}", path.display()))?;
    let mut events = Vec::new();
    for line in log.lines().skip(skip) {
        let e: serde_json::Value = serde_json::from_str(line).context("audit log JSON")?;
        if e["user"]["username"] == user {
            events.push(e);
        }
    }
    Ok(events)
}

/// The request an audit event records.
fn request_of(e: &serde_json::Value) -> Request {
    let r = &e["objectRef"];
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let resource = match r["subresource"].as_str() {
        Some(sub) => format!("{}/{sub}", str_of(&r["resource"])),
        None => str_of(&r["resource"]),
    };
    Request {
        namespace: r["namespace"].as_str().map(str::to_owned),
        group: str_of(&r["apiGroup"]),
        resource,
        verb: str_of(&e["verb"]),
    }
}

/// Fails unless the RBAC in `rbac_yaml` (named `source` in messages) is
/// exactly what ServiceAccount `namespace/name` used, as the audit log at
/// `audit_log` recorded it: no request denied, every request covered by a
/// grant, and every grant used by some request or listed in
/// `needed_but_not_exercised` (group, resource, verb, reason).
pub fn check_rbac_is_exactly_what_is_used(
    audit_log: &Path,
    rbac_yaml: &str,
    source: &str,
    (namespace, name): (&str, &str),
    needed_but_not_exercised: &[(&str, &str, &str, &str)],
) -> Result<()> {
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let (used, denied) = audited_requests(audit_log, &user)?;
    ensure!(
        !used.is_empty(),
        "the audit log recorded nothing for {user}"
    );
    let show = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join("; ");
    ensure!(
        denied.is_empty(),
        "{source} is missing permissions (denied): {}",
        show(&mut denied.iter().map(ToString::to_string))
    );
    let grants = grants_of(rbac_yaml, namespace, name)?;
    ensure!(!grants.is_empty(), "{source} grants {user} nothing");
    let ungranted: Vec<_> = used
        .iter()
        .filter(|r| !grants.iter().any(|g| g.covers(r)))
        .collect();
    ensure!(
        ungranted.is_empty(),
        "used but not granted by {source} (granted elsewhere?): {}",
        show(&mut ungranted.iter().map(ToString::to_string))
    );
    let allowed: BTreeSet<(&str, &str, &str)> = needed_but_not_exercised
        .iter()
        .map(|(g, r, v, _)| (*g, *r, *v))
        .collect();
    let surplus: Vec<_> = grants
        .iter()
        .filter(|g| !used.iter().any(|r| g.covers(r)))
        .filter(|g| !allowed.contains(&(g.group.as_str(), g.resource.as_str(), g.verb.as_str())))
        .collect();
    ensure!(
        surplus.is_empty(),
        "{source} grants what the controller never used: {}\nused: {}",
        show(&mut surplus.iter().map(ToString::to_string)),
        show(&mut used.iter().map(ToString::to_string))
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: c}
rules:
  - apiGroups: ["objectbucket.io"]
    resources: ["objectbuckets", "objectbuckets/status"]
    verbs: ["patch"]
---
kind: ClusterRoleBinding
metadata: {name: c}
roleRef: {kind: ClusterRole, name: c}
subjects: [{kind: ServiceAccount, name: p, namespace: sys}]
---
kind: Role
metadata: {name: r, namespace: apps}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get"]
---
kind: RoleBinding
metadata: {name: r, namespace: apps}
roleRef: {kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: p, namespace: sys}]
---
kind: RoleBinding
metadata: {name: other, namespace: apps}
roleRef: {kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: someone-else, namespace: sys}]
"#;

    fn req(ns: Option<&str>, group: &str, resource: &str, verb: &str) -> Request {
        Request {
            namespace: ns.map(str::to_owned),
            group: group.into(),
            resource: resource.into(),
            verb: verb.into(),
        }
    }

    #[test]
    fn grants_follow_the_bindings_and_their_scopes() {
        let grants = grants_of(RBAC, "sys", "p").expect("grants");
        assert_eq!(grants.len(), 3, "{grants:?}");
        let covered = |r: &Request| grants.iter().any(|g| g.covers(r));
        assert!(covered(&req(
            None,
            "objectbucket.io",
            "objectbuckets",
            "patch"
        )));
        assert!(covered(&req(
            None,
            "objectbucket.io",
            "objectbuckets/status",
            "patch"
        )));
        assert!(covered(&req(Some("apps"), "", "secrets", "get")));
        assert!(!covered(&req(Some("other"), "", "secrets", "get")));
        assert!(!covered(&req(None, "", "secrets", "get")), "all namespaces");
        assert!(grants_of(RBAC, "sys", "nobody").expect("grants").is_empty());
    }

    #[test]
    fn a_binding_to_a_missing_role_is_an_error() {
        let yaml = "kind: RoleBinding\nmetadata: {name: r, namespace: a}\nroleRef: {kind: Role, name: r}\nsubjects: [{kind: ServiceAccount, name: p, namespace: sys}]\n";
        assert!(grants_of(yaml, "sys", "p").is_err());
    }
}
