//! The typed custom headers a command carries as `extFields` strings (RocketMQ's
//! `CommandCustomHeader`s), under RocketMQ's class and field names.
//!
//! Each header is declared with `custom_header!`: its fields, their types and their Java
//! names, and the codec follows from the field types (see `HeaderField`), as Java's
//! `decodeCommandCustomHeader` and `makeCustomHeaderToNet` derive theirs by reflection. A
//! missing or malformed required field is an error naming the header and the field.

use std::collections::HashMap;

/// A command's `extFields`, the strings a custom header is the typed view of. SipHash (std's
/// default), not FxHash: the keys come from the network.
pub(crate) type ExtFields = HashMap<String, String>;

/// Declares a custom header: the struct, and its [`CustomHeader`] codec.
///
/// ```ignore
/// custom_header! {
///     /// `GetRouteInfoRequestHeader` (GET_ROUTEINFO_BY_TOPIC).
///     #[derive(Debug, Clone, PartialEq, Eq)]
///     pub struct GetRouteInfoRequestHeader("GET_ROUTEINFO_BY_TOPIC") {
///         pub topic: String = "topic",
///         pub accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
///     }
/// }
/// ```
///
/// Each field is `name: Type = KEY`, KEY its Java name (a literal or a constant). The string
/// in parentheses names the header in errors. The field's type gives its rule:
///
/// - `String`, `i32`, `i64`, `bool`: required; missing is an error, as is an integer that does
///   not parse (a boolean is Java's `Boolean.parseBoolean`: anything but "true" is false).
/// - `Option<T>`: absent reads as None, and None is not written (Java's null).
/// - `T = KEY or DEFAULT`: a Java primitive with a default: absent reads as DEFAULT, and it is
///   always written.
///
/// A second form declares a header whose fields also travel under short names, with a newtype
/// for the short form (`SendMessageRequestHeaderV2`'s letters):
/// `pub struct Long("LONG"); pub struct Short("SHORT"); { field: T = "longName" / "a", ... }`.
macro_rules! custom_header {
    (@read $fields:ident, $header:ident, $ty:ty, $key:expr) => {
        <$ty as $crate::remoting::header::HeaderField>::read($fields.get($key), $header, $key)?
    };
    (@read $fields:ident, $header:ident, $ty:ty, $key:expr, $default:expr) => {
        <Option<$ty> as $crate::remoting::header::HeaderField>::read(
            $fields.get($key),
            $header,
            $key,
        )?
        .unwrap_or($default)
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($header:literal) {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty = $key:tt $(or $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
        }

        impl $crate::remoting::header::CustomHeader for $name {
            const NAME: &'static str = $header;

            fn read_ext_fields(
                fields: &$crate::remoting::ExtFields,
                header: &'static str,
            ) -> Result<Self, $crate::remoting::HeaderError> {
                Ok($name {
                    $( $field: custom_header!(@read fields, header, $ty, $key $(, $default)?), )*
                })
            }

            fn to_ext_fields(&self) -> $crate::remoting::ExtFields {
                let mut fields = $crate::remoting::ExtFields::new();
                $( $crate::remoting::header::HeaderField::write(&self.$field, &mut fields, $key); )*
                fields
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($header:literal);
        $(#[$short_meta:meta])*
        $short_vis:vis struct $short:ident ($short_header:literal);
        {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty = $key:tt / $short_key:tt
            ),* $(,)?
        }
    ) => {
        custom_header! {
            $(#[$meta])*
            $vis struct $name ($header) {
                $( $(#[$fmeta])* $fvis $field: $ty = $key, )*
            }
        }

        $(#[$short_meta])*
        $short_vis struct $short(pub $name);

        impl $crate::remoting::header::CustomHeader for $short {
            const NAME: &'static str = $short_header;

            fn read_ext_fields(
                fields: &$crate::remoting::ExtFields,
                header: &'static str,
            ) -> Result<Self, $crate::remoting::HeaderError> {
                Ok($short($name {
                    $( $field: custom_header!(@read fields, header, $ty, $short_key), )*
                }))
            }

            fn to_ext_fields(&self) -> $crate::remoting::ExtFields {
                let mut fields = $crate::remoting::ExtFields::new();
                $(
                    $crate::remoting::header::HeaderField::write(
                        &self.0.$field,
                        &mut fields,
                        $short_key,
                    );
                )*
                fields
            }
        }
    };
}

mod admin;
mod consume;
mod controller;
mod namesrv;
mod pop;
mod send;

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use admin::CreateTopicRequestHeader;
pub(crate) use admin::{
    DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader, ResetOffsetRequestHeader, UnregisterClientRequestHeader,
};
pub(crate) use consume::{
    pull_sys_flag, GetConsumerListByGroupRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader, QueryMessageRequestHeader, QueryMessageResponseHeader,
    QueueRequestHeader, SearchOffsetRequestHeader, ViewMessageRequestHeader,
};
pub use consume::{
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
pub(crate) use controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, MasterInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
};
pub(crate) use namesrv::{DeleteTopicFromNamesrvRequestHeader, QueryDataVersionResponseHeader};
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use namesrv::{
    GetRouteInfoRequestHeader, QueryDataVersionRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use pop::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
pub use send::ConsumerSendMsgBackRequestHeader;
pub(crate) use send::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use send::{
    RecallMessageRequestHeader, RecallMessageResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader,
};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("{header} header: field `{field}` is missing")]
    Missing {
        header: &'static str,
        field: &'static str,
    },
    #[error("{header} header: `{field}`={value} is not an integer")]
    NotAnInteger {
        header: &'static str,
        field: &'static str,
        value: String,
    },
    #[error("request code {0} is not a send (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)")]
    NotASend(i32),
}

/// A `CommandCustomHeader`: a typed view of a command's `extFields`, declared with
/// `custom_header!`.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) trait CustomHeader: Sized {
    /// What errors call the header: its request code's name, or the request's and "response".
    const NAME: &'static str;

    /// Reads the fields, naming `header` in errors: a header several requests share is named
    /// after the request at hand (GET_MAX_OFFSET, GET_MIN_OFFSET...).
    fn read_ext_fields(fields: &ExtFields, header: &'static str) -> Result<Self, HeaderError>;

    fn from_ext_fields(fields: &ExtFields) -> Result<Self, HeaderError> {
        Self::read_ext_fields(fields, Self::NAME)
    }

    /// The fields as Java's `makeCustomHeaderToNet` writes them: nulls left out, numbers and
    /// booleans as their `toString`.
    fn to_ext_fields(&self) -> ExtFields;
}

/// A field's value as the text `extFields` carry.
pub(crate) trait FieldValue: Sized {
    /// None for malformed text, which only a number can be.
    fn parse(text: &str) -> Option<Self>;
    fn text(&self) -> String;
}

impl FieldValue for String {
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }

    fn text(&self) -> String {
        self.clone()
    }
}

/// Java's `Boolean.parseBoolean`: "true" in any case is true, anything else false.
impl FieldValue for bool {
    fn parse(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true"))
    }

    fn text(&self) -> String {
        self.to_string()
    }
}

/// Java's `Integer.parseInt` / `Long.parseLong`: an optional sign and digits, no spaces.
macro_rules! integer_field_value {
    ($($int:ty),*) => {$(
        impl FieldValue for $int {
            fn parse(text: &str) -> Option<Self> {
                text.parse().ok()
            }

            fn text(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

integer_field_value!(i32, i64);

/// How a header field is read from and written to `extFields`: a plain value is required, an
/// `Option` may be absent (null) and is then left out.
pub(crate) trait HeaderField: Sized {
    fn read(
        text: Option<&String>,
        header: &'static str,
        field: &'static str,
    ) -> Result<Self, HeaderError>;

    fn write(&self, fields: &mut ExtFields, field: &'static str);
}

impl<T: FieldValue> HeaderField for Option<T> {
    fn read(
        text: Option<&String>,
        header: &'static str,
        field: &'static str,
    ) -> Result<Self, HeaderError> {
        text.map(|v| {
            T::parse(v).ok_or_else(|| HeaderError::NotAnInteger {
                header,
                field,
                value: v.clone(),
            })
        })
        .transpose()
    }

    fn write(&self, fields: &mut ExtFields, field: &'static str) {
        if let Some(v) = self {
            fields.insert(field.to_owned(), v.text());
        }
    }
}

impl<T: FieldValue> HeaderField for T {
    fn read(
        text: Option<&String>,
        header: &'static str,
        field: &'static str,
    ) -> Result<Self, HeaderError> {
        Option::<T>::read(text, header, field)?.ok_or(HeaderError::Missing { header, field })
    }

    fn write(&self, fields: &mut ExtFields, field: &'static str) {
        fields.insert(field.to_owned(), self.text());
    }
}
