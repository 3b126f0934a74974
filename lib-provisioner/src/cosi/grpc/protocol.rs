//! [`Protocol`]: what the driver advertises, and the S3 messages it
//! answers with.

use super::proto::{
    self, ObjectProtocol, ObjectProtocolAndBucketInfo, S3AddressingStyle, S3BucketInfo,
    object_protocol, s3_addressing_style,
};
use super::status::invalid;
use crate::core::provisioner::{AddressingStyle, StoreEndpoint};

/// An object protocol the driver serves. A [`Provisioner`](crate::core::provisioner::Provisioner)
/// hands out S3 access keys, so S3 is the one there is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// Amazon S3 and compatible stores.
    S3,
}

impl Protocol {
    pub(super) fn to_proto(self) -> ObjectProtocol {
        let kind = match self {
            Self::S3 => object_protocol::Type::S3,
        };
        ObjectProtocol {
            r#type: kind.into(),
        }
    }
}

/// The protocols a request names, each one the driver serves.
pub(super) fn requested(
    protocols: &[ObjectProtocol],
    served: &[Protocol],
) -> Result<(), tonic::Status> {
    for p in protocols {
        let name = object_protocol::Type::try_from(p.r#type)
            .map(|t| t.as_str_name().to_owned())
            .unwrap_or_else(|_| format!("#{}", p.r#type));
        let ours = served.iter().any(|s| s.to_proto() == *p);
        if !ours {
            return Err(invalid(format!(
                "protocol {name} is not served by this driver, which serves {}: ask for one of those in the BucketClaim's protocols",
                names(served)
            )));
        }
    }
    Ok(())
}

/// The one protocol of a grant, which must be served.
pub(super) fn granted(
    protocol: Option<&ObjectProtocol>,
    served: &[Protocol],
) -> Result<(), tonic::Status> {
    match protocol {
        Some(p) if p.r#type != i32::from(object_protocol::Type::Unknown) => {
            requested(std::slice::from_ref(p), served)
        }
        _ => Err(invalid(format!(
            "the access request names no protocol: set the BucketAccess's protocol to one of {}",
            names(served)
        ))),
    }
}

fn names(served: &[Protocol]) -> String {
    served
        .iter()
        .map(|p| match p {
            Protocol::S3 => "S3",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The region clients sign with when the store names none: S3's default
/// (COSI requires a non-empty region).
pub const DEFAULT_REGION: &str = "us-east-1";

/// A bucket's S3 info: its id, the store's URL, region and addressing style.
pub(super) fn s3_info(bucket_id: &str, endpoint: &StoreEndpoint) -> ObjectProtocolAndBucketInfo {
    let style = match endpoint.addressing_style {
        AddressingStyle::Virtual => s3_addressing_style::Style::Virtual,
        _ => s3_addressing_style::Style::Path,
    };
    let region = match endpoint.region.as_str() {
        "" => DEFAULT_REGION.to_owned(),
        named => named.to_owned(),
    };
    ObjectProtocolAndBucketInfo {
        s3: Some(S3BucketInfo {
            bucket_id: bucket_id.to_owned(),
            endpoint: endpoint.url(),
            region,
            addressing_style: Some(S3AddressingStyle {
                style: style.into(),
            }),
        }),
        ..Default::default()
    }
}

/// S3 credentials as COSI carries them.
pub(super) fn s3_credentials(c: &crate::core::provisioner::Credentials) -> proto::CredentialInfo {
    proto::CredentialInfo {
        s3: Some(proto::S3CredentialInfo {
            access_key_id: c.access_key_id.clone(),
            access_secret_key: c.secret_access_key.clone(),
        }),
        ..Default::default()
    }
}
