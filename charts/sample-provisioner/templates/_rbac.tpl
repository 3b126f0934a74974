{{/* Rules on cluster-scoped objects: always in the ClusterRole. */}}
{{- define "sample-provisioner.clusterScopedRules" -}}
# ObjectBuckets (cluster-scoped): cached (list/watch), read after a create
# conflict (get), created at binding, merge-patched (finalizer, endpoint,
# takeover, release) and deleted at teardown.
- apiGroups: ["objectbucket.io"]
  resources: ["objectbuckets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# ObjectBucket phase (Bound/Released/Failed): merge patch on status.
- apiGroups: ["objectbucket.io"]
  resources: ["objectbuckets/status"]
  verbs: ["patch"]
# StorageClasses: cached (list/watch) to find the classes naming this
# provisioner, their parameters and reclaim policy; never written.
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["list", "watch"]
{{- end }}

{{/* Rules in the claims' namespaces: cluster-wide or a Role in each. */}}
{{- define "sample-provisioner.claimNamespaceRules" -}}
# Claims: watched (list/watch), read (get) when the cache lags, and written
# only with merge patches (finalizer, generated-name annotation,
# spec.objectBucketName, the finalizer's removal); never replaced.
- apiGroups: ["objectbucket.io"]
  resources: ["objectbucketclaims"]
  verbs: ["get", "list", "watch", "patch"]
# Claim status (phase, message, Bound condition): merge patch.
- apiGroups: ["objectbucket.io"]
  resources: ["objectbucketclaims/status"]
  verbs: ["patch"]
# Secrets: the claim's credentials (watched by label, read, created,
# replaced when credentials change, patched: the finalizer of older versions
# off; never deleted: the garbage collector does that with the claim){{ if ne .Values.rbac.scope "namespaced" }}, and the
# StorageClasses' admin Secrets (get){{ end }}.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
# The claim's endpoint ConfigMap: same life cycle as its Secret (never
# deleted either; the sample's creation intents, which it deletes, have a
# Role of their own in the release namespace).
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
# Events on claims: created, and patched when an event repeats.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* A RoleBinding of the Role `name` in `namespace` to the ServiceAccount. */}}
{{- define "sample-provisioner.roleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "sample-provisioner.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "sample-provisioner.serviceAccountName" .root }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/* COSI's rules (deploy/rbac-cosi.yaml): cluster-wide, since its
controllers watch every namespace. */}}
{{- define "sample-provisioner.cosiRules" -}}
# BucketClaims: cached (list/watch), read (get); binding role: merge-patched
# (finalizer, has-bucketaccess-references annotation), status merge-patched.
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketclaims"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketclaims/status"]
  verbs: ["patch"]
# Buckets (cluster-scoped): cached, read, created for a claim and deleted
# with it, patched (static claim UID, being-deleted annotation, finalizer);
# status merge-patched by the driver role.
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["buckets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["buckets/status"]
  verbs: ["patch"]
# BucketAccesses: cached, read, patched (finalizer, cleanup annotation);
# status merge-patched.
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketaccesses"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketaccesses/status"]
  verbs: ["patch"]
# Owner references with blockOwnerDeletion on the access Secrets (the
# OwnerReferencesPermissionEnforcement admission plugin checks this).
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketaccesses/finalizers"]
  verbs: ["update"]
# The classes: cached, read; never written.
- apiGroups: ["objectstorage.k8s.io"]
  resources: ["bucketclasses", "bucketaccessclasses"]
  verbs: ["get", "list", "watch"]
# A BucketAccess's Secrets: created empty first, read, filled (patch), and
# at revocation their finalizer removed (patch) and deleted. The rule
# allows these verbs on every Secret (RBAC cannot select by owner or
# label); the code acts only on those the BucketAccess controls
# (docs/security.md, "COSI's Secret deletes").
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
# Events on the COSI objects.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
