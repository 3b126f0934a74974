//! Prometheus text format (enough of it for `/metrics` of kube-apiserver and
//! of the controller), and the apiserver's request counter.

use std::collections::BTreeMap;

/// One sample: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the samples of a text exposition; comments and malformed lines
/// are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => (&line[..i], &line[i..]),
        None => return None,
    };
    let mut labels = BTreeMap::new();
    let rest = if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let end = loop {
            // key
            let mut key = String::new();
            let mut next = chars.next();
            while let Some((_, c)) = next {
                if c == '=' || c == '}' {
                    break;
                }
                if c != ',' && c != ' ' {
                    key.push(c);
                }
                next = chars.next();
            }
            match next {
                Some((i, '}')) => break i,
                Some((_, '=')) => {}
                _ => return None,
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return None;
            }
            let mut value = String::new();
            loop {
                match chars.next()? {
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    (_, '"') => break,
                    (_, c) => value.push(c),
                }
            }
            labels.insert(key, value);
        };
        &body[end + 1..]
    } else {
        rest
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Sum of the samples named `name` whose labels pass `filter`.
pub fn sum(
    samples: &[Sample],
    name: &str,
    filter: impl Fn(&BTreeMap<String, String>) -> bool,
) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && filter(&s.labels))
        .map(|s| s.value)
        .sum::<f64>()
        + 0.0
}

/// Verbs of `apiserver_request_total` that write.
pub const WRITE_VERBS: &[&str] = &[
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "DELETECOLLECTION",
    "APPLY",
    "CREATE",
    "UPDATE",
];

/// A request kind as the apiserver counts it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// `resource[/subresource]`, with ` (group)` for groups other than the
    /// core group and `objectbucket.io`.
    pub resource: String,
    pub verb: String,
    pub code: String,
}

/// `apiserver_request_total`, by resource, verb and response code.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests(pub BTreeMap<Key, f64>);

impl Requests {
    /// `apiserver_request_total`.
    pub fn from_metrics(text: &str) -> Self {
        Self::named(text, "apiserver_request_total")
    }

    /// Any apiserver series labelled like `apiserver_request_total` (e.g.
    /// `apiserver_request_duration_seconds_sum`).
    pub fn named(text: &str, name: &str) -> Self {
        let mut out = BTreeMap::new();
        for s in parse(text) {
            if s.name != name {
                continue;
            }
            let get = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
            let mut resource = get("resource");
            if resource.is_empty() {
                // Non-resource URLs (/metrics, /readyz): not API objects.
                continue;
            }
            let sub = get("subresource");
            if !sub.is_empty() {
                resource = format!("{resource}/{sub}");
            }
            let group = get("group");
            if !group.is_empty() && group != "objectbucket.io" {
                resource = format!("{resource} ({group})");
            }
            *out.entry(Key {
                resource,
                verb: get("verb"),
                code: get("code"),
            })
            .or_insert(0.0) += s.value;
        }
        Self(out)
    }

    /// `self - before`, dropping zeroes.
    pub fn since(&self, before: &Requests) -> Requests {
        Requests(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0)))
                .filter(|(_, v)| v.abs() > 0.5)
                .collect(),
        )
    }

    /// `self - before` for non-integer series (durations), dropping zeroes.
    pub fn since_exact(&self, before: &Requests) -> Requests {
        Requests(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0)))
                .filter(|(_, v)| v.abs() > 1e-9)
                .collect(),
        )
    }

    pub fn filter(&self, f: impl Fn(&Key) -> bool) -> Requests {
        Requests(
            self.0
                .iter()
                .filter(|(k, _)| f(k))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        )
    }

    pub fn writes(&self) -> Requests {
        self.filter(|k| WRITE_VERBS.contains(&k.verb.as_str()))
    }

    pub fn total(&self) -> f64 {
        self.0.values().sum::<f64>() + 0.0
    }

    /// Removes `n` successful requests of this resource and verb (requests
    /// the benchmark itself made), from the 2xx codes.
    pub fn subtract(&mut self, resource: &str, verb: &str, mut n: f64) {
        for (k, v) in self.0.iter_mut() {
            if n <= 0.0 {
                break;
            }
            if k.resource == resource && k.verb == verb && k.code.starts_with('2') {
                let take = v.min(n);
                *v -= take;
                n -= take;
            }
        }
        self.0.retain(|_, v| v.abs() > 0.5);
    }

    /// Counts by (resource, verb), codes summed.
    pub fn by_resource_verb(&self) -> BTreeMap<(String, String), f64> {
        let mut out = BTreeMap::new();
        for (k, v) in &self.0 {
            *out.entry((k.resource.clone(), k.verb.clone()))
                .or_insert(0.0) += v;
        }
        out
    }

    /// Requests whose response was not 2xx, by (resource, verb, code).
    pub fn failed(&self) -> Requests {
        self.filter(|k| !k.code.starts_with('2'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_and_values() {
        let text = r#"# HELP x y
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",group="objectbucket.io",resource="objectbucketclaims",subresource="status",verb="PATCH"} 2
apiserver_request_total{code="201",group="events.k8s.io",resource="events",subresource="",verb="POST"} 1
obc_reconciles_total{result="ok"} 7
plain 3.5
"#;
        let s = parse(text);
        assert_eq!(s.len(), 5);
        assert_eq!(sum(&s, "obc_reconciles_total", |_| true), 7.0);
        assert_eq!(sum(&s, "plain", |_| true), 3.5);
        let r = Requests::from_metrics(text);
        let by = r.by_resource_verb();
        assert_eq!(by[&("configmaps".into(), "POST".into())], 5.0);
        assert_eq!(
            by[&("objectbucketclaims/status".into(), "PATCH".into())],
            2.0
        );
        assert_eq!(by[&("events (events.k8s.io)".into(), "POST".into())], 1.0);
        let mut w = r.writes();
        w.subtract("configmaps", "POST", 4.0);
        assert_eq!(w.total(), 4.0);
    }

    #[test]
    fn escaped_label_values() {
        let s = parse(r#"m{a="x\"y",b="z"} 1"#);
        assert_eq!(s[0].labels["a"], "x\"y");
        assert_eq!(s[0].labels["b"], "z");
    }
}
