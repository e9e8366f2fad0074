//! The name server's headers: a broker's registration, its unregistration and its data
//! version check, and a client's route lookup.

/// RocketMQ's `MixAll.ZONE_NAME`: the register request's zone travels as a bare extField.
pub(crate) const ZONE_NAME_FIELD: &str = "__ZONE_NAME";

custom_header! {
    /// `RegisterBrokerRequestHeader` (REGISTER_BROKER), plus the zone name the processor reads
    /// from the same `extFields`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct RegisterBrokerRequestHeader("REGISTER_BROKER") {
        pub broker_name: String = "brokerName",
        pub broker_addr: String = "brokerAddr",
        pub cluster_name: String = "clusterName",
        pub ha_server_addr: String = "haServerAddr",
        pub broker_id: i64 = "brokerId",
        pub heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis",
        /// None from brokers older than 5.0, which the route table treats differently.
        pub enable_acting_master: Option<bool> = "enableActingMaster",
        /// The body is zlib-compressed (`RegisterBrokerBody.encode(true)`); a Java primitive
        /// boolean, false when absent.
        pub compressed: bool = "compressed" or false,
        /// `UtilAll.crc32` of the body; 0 means unchecked.
        pub body_crc32: i32 = "bodyCrc32" or 0,
        pub zone_name: Option<String> = ZONE_NAME_FIELD,
    }
}

impl RegisterBrokerRequestHeader {
    /// The name server's `checksum`: a nonzero `bodyCrc32` must match the body.
    pub(crate) fn body_crc_matches(&self, body: &[u8]) -> bool {
        self.body_crc32 == 0 || self.body_crc32 == crate::protocol::body_crc(body)
    }
}

custom_header! {
    /// `RegisterBrokerResponseHeader`: what a slave learns about its master.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct RegisterBrokerResponseHeader("REGISTER_BROKER response") {
        pub ha_server_addr: Option<String> = "haServerAddr",
        pub master_addr: Option<String> = "masterAddr",
    }
}

custom_header! {
    /// `DeleteTopicFromNamesrvRequestHeader` (DELETE_TOPIC_IN_NAMESRV): 5.x names the cluster
    /// whose brokers forget the topic; without it, every broker does.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct DeleteTopicFromNamesrvRequestHeader("DELETE_TOPIC_IN_NAMESRV") {
        pub topic: String = "topic",
        pub cluster_name: Option<String> = "clusterName",
    }
}

custom_header! {
    /// `UnRegisterBrokerRequestHeader` (UNREGISTER_BROKER).
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct UnRegisterBrokerRequestHeader("UNREGISTER_BROKER") {
        pub broker_name: String = "brokerName",
        pub broker_addr: String = "brokerAddr",
        pub cluster_name: String = "clusterName",
        pub broker_id: i64 = "brokerId",
    }
}

custom_header! {
    /// `QueryDataVersionRequestHeader` (QUERY_DATA_VERSION); the body is the broker's
    /// DataVersion.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct QueryDataVersionRequestHeader("QUERY_DATA_VERSION") {
        pub broker_name: String = "brokerName",
        pub broker_addr: String = "brokerAddr",
        pub cluster_name: String = "clusterName",
        pub broker_id: i64 = "brokerId",
    }
}

custom_header! {
    /// `QueryDataVersionResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct QueryDataVersionResponseHeader("QUERY_DATA_VERSION response") {
        pub changed: bool = "changed",
    }
}

custom_header! {
    /// `GetRouteInfoRequestHeader` (GET_ROUTEINFO_BY_TOPIC).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct GetRouteInfoRequestHeader("GET_ROUTEINFO_BY_TOPIC") {
        pub topic: String = "topic",
        /// Asks for the quoted-key JSON even from a client older than 4.9.4.
        pub accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::{CustomHeader, ExtFields};

    #[test]
    fn name_server_headers_round_trip() {
        let reg = RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.1:10911".into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: "127.0.0.1:10912".into(),
            broker_id: 1,
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: 0,
            zone_name: None,
        };
        let map = reg.to_ext_fields();
        assert_eq!(map["compressed"], "false");
        assert_eq!(map["bodyCrc32"], "0");
        assert_eq!(
            RegisterBrokerRequestHeader::from_ext_fields(&map),
            Ok(reg.clone())
        );
        // An old broker sends neither compressed nor bodyCrc32 nor enableActingMaster.
        let mut old = map.clone();
        for k in [
            "compressed",
            "bodyCrc32",
            "enableActingMaster",
            "heartbeatTimeoutMillis",
        ] {
            old.remove(k);
        }
        let parsed = RegisterBrokerRequestHeader::from_ext_fields(&old).unwrap();
        assert_eq!(parsed.enable_acting_master, None);
        assert!(!parsed.compressed);
        assert!(parsed.body_crc_matches(b"anything"));
        let checked = RegisterBrokerRequestHeader {
            body_crc32: crate::protocol::body_crc(b"body"),
            ..reg
        };
        assert!(checked.body_crc_matches(b"body"));
        assert!(!checked.body_crc_matches(b"bodY"));

        let resp = RegisterBrokerResponseHeader {
            ha_server_addr: Some("10.0.0.1:10912".into()),
            master_addr: Some("10.0.0.1:10911".into()),
        };
        assert_eq!(
            RegisterBrokerResponseHeader::from_ext_fields(&resp.to_ext_fields()),
            Ok(resp)
        );
        assert_eq!(
            RegisterBrokerResponseHeader::from_ext_fields(&ExtFields::new()),
            Ok(RegisterBrokerResponseHeader::default())
        );
        let unreg = UnRegisterBrokerRequestHeader {
            broker_name: "b".into(),
            broker_addr: "a:1".into(),
            cluster_name: "c".into(),
            broker_id: 0,
        };
        assert_eq!(
            UnRegisterBrokerRequestHeader::from_ext_fields(&unreg.to_ext_fields()),
            Ok(unreg)
        );
        let route = GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: None,
        };
        assert_eq!(
            GetRouteInfoRequestHeader::from_ext_fields(&route.to_ext_fields()),
            Ok(route)
        );
        let changed = QueryDataVersionResponseHeader { changed: true };
        assert_eq!(changed.to_ext_fields()["changed"], "true");
        assert_eq!(
            QueryDataVersionResponseHeader::from_ext_fields(&changed.to_ext_fields()),
            Ok(changed)
        );
    }

    #[test]
    fn a_registration_without_a_required_field_names_it() {
        let err = RegisterBrokerRequestHeader::from_ext_fields(&ExtFields::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "REGISTER_BROKER header: field `brokerName` is missing"
        );
        let err = QueryDataVersionResponseHeader::from_ext_fields(&ExtFields::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "QUERY_DATA_VERSION response header: field `changed` is missing"
        );
    }
}
