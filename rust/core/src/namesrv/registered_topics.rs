//! What the name server reads of a REGISTER_BROKER body: each topic's route (its queues,
//! permission and flag) and the table's data version, not the rest of each `TopicConfig`.
//! Building every config in full was two thirds of the time a 10,000-topic registration took
//! (`bench scale`); the other fields are skipped as they are read.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::protocol::body::{
    mq_version, perm, BodyError, DataVersion, RegisterBrokerBody, TopicConfig,
    TopicConfigSerializeWrapper, DEFAULT_QUEUE_NUMS,
};
use crate::protocol::json::parse_lenient;

/// A topic as the routes hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicRoute {
    pub(crate) topic_name: String,
    pub(crate) read_queue_nums: i32,
    pub(crate) write_queue_nums: i32,
    pub(crate) perm: i32,
    pub(crate) topic_sys_flag: i32,
}

impl From<&TopicConfig> for TopicRoute {
    fn from(c: &TopicConfig) -> Self {
        TopicRoute {
            topic_name: c.topic_name.clone(),
            read_queue_nums: c.read_queue_nums,
            write_queue_nums: c.write_queue_nums,
            perm: c.perm,
            topic_sys_flag: c.topic_sys_flag,
        }
    }
}

/// A registration's `topicConfigSerializeWrapper`, as routes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RegisteredTopics {
    #[serde(default, rename = "topicConfigTable", deserialize_with = "routes")]
    pub(crate) topics: Vec<TopicRoute>,
    #[serde(default)]
    pub(crate) data_version: DataVersion,
}

impl From<TopicConfigSerializeWrapper> for RegisteredTopics {
    fn from(w: TopicConfigSerializeWrapper) -> Self {
        RegisteredTopics {
            topics: w
                .topic_config_table
                .values()
                .map(TopicRoute::from)
                .collect(),
            data_version: w.data_version,
        }
    }
}

/// A REGISTER_BROKER body, as the name server reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RegisteredBody {
    #[serde(default, rename = "topicConfigSerializeWrapper")]
    pub(crate) topics: RegisteredTopics,
    #[serde(default)]
    pub(crate) filter_server_list: Vec<String>,
}

impl RegisteredBody {
    /// As RocketMQ's `RegisterBrokerBody.decode`: a bare wrapper from brokers before 3.0.11,
    /// the compressed binary form when the header says so, JSON otherwise.
    pub(crate) fn decode(
        data: &[u8],
        compressed: bool,
        broker_version: i32,
    ) -> Result<Self, BodyError> {
        if compressed {
            let body = RegisterBrokerBody::decode_compressed(data, broker_version)?;
            return Ok(RegisteredBody {
                topics: body.topic_config_serialize_wrapper.into(),
                filter_server_list: body.filter_server_list,
            });
        }
        if broker_version < mq_version::V3_0_11 {
            return Ok(RegisteredBody {
                topics: parse_lenient(data, "TopicConfigSerializeWrapper")?,
                filter_server_list: Vec::new(),
            });
        }
        Ok(parse_lenient(data, "RegisterBrokerBody")?)
    }
}

/// The fields of a `TopicConfig` a route needs, with Java's defaults.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RouteFields {
    topic_name: Option<String>,
    #[serde(default = "java_queue_nums")]
    read_queue_nums: i32,
    #[serde(default = "java_queue_nums")]
    write_queue_nums: i32,
    #[serde(default = "java_perm")]
    perm: i32,
    #[serde(default)]
    topic_sys_flag: i32,
}

fn java_queue_nums() -> i32 {
    DEFAULT_QUEUE_NUMS
}

fn java_perm() -> i32 {
    perm::PERM_READ | perm::PERM_WRITE
}

/// `topicConfigTable` as a list, in the order sent: no map is built, and the name a config
/// carries is the one used (its key when it carries none).
fn routes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TopicRoute>, D::Error> {
    struct Routes;
    impl<'de> Visitor<'de> for Routes {
        type Value = Vec<TopicRoute>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of topic configs")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some((key, f)) = map.next_entry::<String, RouteFields>()? {
                out.push(TopicRoute {
                    topic_name: f.topic_name.unwrap_or(key),
                    read_queue_nums: f.read_queue_nums,
                    write_queue_nums: f.write_queue_nums,
                    perm: f.perm,
                    topic_sys_flag: f.topic_sys_flag,
                });
            }
            Ok(out)
        }
    }
    d.deserialize_map(Routes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::body::tests::JAVA_REGISTER_BODY;
    use crate::protocol::json::JsonError;

    #[test]
    fn a_body_reads_as_the_routes_of_its_topics_in_every_form() {
        let mut wrapper = TopicConfigSerializeWrapper::default();
        for (name, queues) in [("a", 4), ("b", 8)] {
            let config = TopicConfig {
                topic_name: name.into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                topic_sys_flag: 1,
                ..TopicConfig::default()
            };
            wrapper.topic_config_table.insert(name.into(), config);
        }
        wrapper.data_version.counter = 7;
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: wrapper.clone(),
            filter_server_list: vec!["f:1".into()],
        };
        let expected = RegisteredTopics::from(wrapper.clone());
        let json = RegisteredBody::decode(&body.encode(), false, mq_version::V5_0_0).unwrap();
        assert_eq!(json.topics, expected);
        assert_eq!(json.filter_server_list, ["f:1"]);
        let zipped =
            RegisteredBody::decode(&body.encode_compressed(), true, mq_version::V5_0_0).unwrap();
        // RocketMQ's line form (`TopicConfig.encode`) carries no sys flag.
        let mut unflagged = expected.clone();
        unflagged
            .topics
            .iter_mut()
            .for_each(|t| t.topic_sys_flag = 0);
        assert_eq!(zipped.topics, unflagged);
        let bare = serde_json::to_vec(&wrapper).unwrap();
        assert_eq!(
            RegisteredBody::decode(&bare, false, 0).unwrap().topics,
            expected
        );

        // Java's defaults for what a config leaves out; its key when it has no name.
        let sparse = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"k":{}}}}"#;
        let read = RegisteredBody::decode(sparse, false, mq_version::V5_0_0).unwrap();
        let k = TopicConfig {
            topic_name: "k".into(),
            ..TopicConfig::default()
        };
        assert_eq!(read.topics.topics, [TopicRoute::from(&k)]);
        assert!(
            RegisteredBody::decode(b"{\"topicConfigSerializeWrapper\":[1]}", false, 400).is_err()
        );
        assert!(matches!(
            RegisteredBody::decode(b"[1]", false, mq_version::V5_0_0),
            Err(BodyError::BadJson(JsonError {
                what: "RegisterBrokerBody",
                ..
            }))
        ));
    }

    #[test]
    fn a_java_brokers_body_with_bare_integer_keys_reads_through_the_lenient_reader() {
        let body = JAVA_REGISTER_BODY.as_bytes();
        assert!(
            serde_json::from_slice::<serde_json::Value>(body).is_err(),
            "not standard JSON"
        );
        let read = RegisteredBody::decode(body, false, mq_version::V5_0_0).unwrap();
        let topic = TopicRoute {
            topic_name: "TopicTest".into(),
            read_queue_nums: 4,
            write_queue_nums: 8,
            perm: 6,
            topic_sys_flag: 0,
        };
        assert_eq!(read.topics.topics, [topic]);
        assert_eq!(read.topics.data_version.counter, 2);
    }
}
