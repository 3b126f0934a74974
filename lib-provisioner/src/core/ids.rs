//! UIDs and resource versions packed for the library's per-object maps.
//!
//! Some maps hold an entry for every claim or child for the process's life
//! (the drift check's verified versions, the config checks' last times).
//! A UID kept as a `String` costs its 24 bytes and a 48-byte allocation, a
//! version another 24 and 32: at 100,000 claims, with two children each,
//! tens of megabytes of text. The apiserver's UIDs are UUIDs and its
//! versions decimal numbers, so both fit in integers; anything else is kept
//! as text, so that two different strings never become the same key.

/// An object's UID: a lowercase UUID as its 128 bits, anything else as text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Uid {
    Uuid(u128),
    Text(Box<str>),
}

impl Uid {
    pub(crate) fn new(uid: &str) -> Self {
        uuid_bits(uid).map_or_else(|| Self::Text(uid.into()), Self::Uuid)
    }
}

/// The text it was made from.
impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uuid(bits) => {
                let hex = format!("{bits:032x}");
                write!(
                    f,
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                )
            }
            Self::Text(text) => f.write_str(text),
        }
    }
}

/// The bits of `s` if it is a UUID in the apiserver's form (lowercase,
/// hyphens at 8, 13, 18, 23): the only form that maps back to `s`.
fn uuid_bits(s: &str) -> Option<u128> {
    let bytes = s.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut bits = 0u128;
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if b != b'-' {
                return None;
            }
            continue;
        }
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        bits = bits << 4 | u128::from(digit);
    }
    Some(bits)
}

/// A `resourceVersion`: a decimal number without leading zeros as the
/// number, anything else as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    Number(u64),
    Text(Box<str>),
}

impl Version {
    pub(crate) fn new(rv: &str) -> Self {
        match rv.parse::<u64>() {
            Ok(n) if n.to_string() == rv => Self::Number(n),
            _ => Self::Text(rv.into()),
        }
    }
}

/// The text it was made from.
impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Text(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_pack_and_other_text_stays_text() {
        let uid = "638ffacd-f666-4402-ba10-7848c66ef576";
        assert_eq!(
            Uid::new(uid),
            Uid::Uuid(0x638ffacd_f666_4402_ba10_7848c66ef576)
        );
        for other in [
            "638FFACD-F666-4402-BA10-7848C66EF576",
            "638ffacdf6664402ba107848c66ef576",
            "638ffacd-f666-4402-ba10-7848c66ef57g",
            "638ffacd+f666-4402-ba10-7848c66ef576",
            "uid-1",
            "",
        ] {
            assert_eq!(Uid::new(other), Uid::Text(other.into()), "{other}");
        }
        assert_eq!(Uid::new(uid).to_string(), uid, "back to its text");
        assert_eq!(Uid::new("uid-1").to_string(), "uid-1");
        assert_ne!(
            Uid::new(uid),
            Uid::new("638ffacd-f666-4402-ba10-7848c66ef577")
        );
    }

    #[test]
    fn decimal_versions_pack_and_others_stay_text() {
        assert_eq!(Version::new("12345"), Version::Number(12345));
        assert_eq!(Version::new("0"), Version::Number(0));
        for other in ["007", "+7", "1e3", "", "abc", "99999999999999999999"] {
            assert_eq!(Version::new(other), Version::Text(other.into()), "{other}");
            assert_eq!(Version::new(other).to_string(), other);
        }
        assert_eq!(Version::new("12345").to_string(), "12345");
    }
}
