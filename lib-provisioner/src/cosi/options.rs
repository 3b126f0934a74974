//! [`CosiOptions`]: what [`ControllerBuilder::cosi`](crate::controller::ControllerBuilder::cosi) takes.

use super::api::schema::DRIVER_PATTERN;

/// How the COSI controllers run: the driver name the driver role serves,
/// and whether the binding role runs too.
///
/// ```
/// use lib_provisioner::cosi::CosiOptions;
/// let options = CosiOptions::new("s3.example.com").expect("a valid driver name");
/// assert!(options.binding());
/// assert!(!options.without_binding().binding());
/// assert!(CosiOptions::new("example.com/bucket").is_err(), "COSI driver names have no '/'");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CosiOptions {
    driver_name: String,
    binding: bool,
}

/// A driver name COSI's CRDs would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "COSI driver name {0:?} is invalid: use 1 to 63 letters, digits, '-' and '.', starting and ending with a letter or digit (no '/': an OBC provisioner name such as example.com/bucket becomes bucket.example.com)"
)]
pub struct InvalidDriverName(pub String);

impl CosiOptions {
    /// Serve Buckets and BucketAccesses whose driver is `driver_name`, and
    /// run the binding role.
    pub fn new(driver_name: impl Into<String>) -> Result<Self, InvalidDriverName> {
        let driver_name = driver_name.into();
        if !valid_driver_name(&driver_name) {
            return Err(InvalidDriverName(driver_name));
        }
        Ok(Self {
            driver_name,
            binding: true,
        })
    }

    /// Leave BucketClaims and the BucketAccess checks to another controller
    /// (upstream's COSI controller): run the driver role only.
    pub fn without_binding(mut self) -> Self {
        self.binding = false;
        self
    }

    /// The driver name.
    pub fn driver_name(&self) -> &str {
        &self.driver_name
    }

    /// Whether the binding role runs.
    pub fn binding(&self) -> bool {
        self.binding
    }
}

/// `DRIVER_PATTERN` (`^[a-zA-Z0-9]([a-zA-Z0-9\-\.]{0,61}[a-zA-Z0-9])?$`),
/// written out: the library has no regex engine.
fn valid_driver_name(name: &str) -> bool {
    debug_assert!(DRIVER_PATTERN.starts_with('^'));
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.';
    (1..=63).contains(&bytes.len())
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_follow_the_crd_pattern() {
        for ok in ["a", "s3.example.com", "A-1.b", &"x".repeat(63)] {
            assert!(CosiOptions::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a/b", "a_b", ".a", &"x".repeat(64)] {
            assert!(CosiOptions::new(bad).is_err(), "{bad}");
        }
    }
}
