//! What an ACL is, by Kafka's codes (`org.apache.kafka.common.acl` and `.resource`): a
//! resource pattern (type, name, literal or prefixed), a principal, a host, an operation and a
//! permission; the filters DescribeAcls and DeleteAcls take; and which ACLs apply to a request.

use serde::{Deserialize, Serialize};

/// The resource's name that stands for every resource of its type in a literal ACL.
pub const WILDCARD: &str = "*";
/// The principal that stands for every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The only name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! coded {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $code:literal $kname:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// Kafka's code.
            pub fn code(self) -> i8 {
                match self { $($name::$v => $code),+ }
            }

            /// The value of Kafka's `code`, if it is a concrete one.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$v),)+ _ => None }
            }

            /// Kafka's name of the value (its Java enum's, as `kafka-acls.sh` prints it).
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $kname),+ }
            }

            /// The value Kafka names `name` (any case; `-` taken for `_`).
            pub fn from_name(name: &str) -> Option<Self> {
                let name = name.to_ascii_uppercase().replace('-', "_");
                Self::ALL.iter().copied().find(|v| v.name() == name)
            }
        }
    };
}

coded!(
    /// Kinds of resource an ACL protects.
    ResourceType {
        /// A topic.
        Topic = 2 "TOPIC",
        /// A consumer group.
        Group = 3 "GROUP",
        /// The cluster (named [`CLUSTER_NAME`]).
        Cluster = 4 "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 "TRANSACTIONAL_ID",
        /// A delegation token.
        DelegationToken = 6 "DELEGATION_TOKEN",
        /// A user (quotas, SCRAM credentials).
        User = 7 "USER",
    }
);

coded!(
    /// How an ACL's resource name matches.
    PatternType {
        /// The name itself, or every resource when it is [`WILDCARD`].
        Literal = 3 "LITERAL",
        /// Every name that starts with it.
        Prefixed = 4 "PREFIXED",
    }
);

coded!(
    /// Operations on resources.
    Operation {
        /// Every operation.
        All = 2 "ALL",
        /// Read (Fetch).
        Read = 3 "READ",
        /// Write (Produce).
        Write = 4 "WRITE",
        /// Create.
        Create = 5 "CREATE",
        /// Delete.
        Delete = 6 "DELETE",
        /// Alter.
        Alter = 7 "ALTER",
        /// Describe.
        Describe = 8 "DESCRIBE",
        /// Inter-broker actions.
        ClusterAction = 9 "CLUSTER_ACTION",
        /// Describe configs.
        DescribeConfigs = 10 "DESCRIBE_CONFIGS",
        /// Alter configs.
        AlterConfigs = 11 "ALTER_CONFIGS",
        /// Idempotent produce.
        IdempotentWrite = 12 "IDEMPOTENT_WRITE",
        /// Create delegation tokens.
        CreateTokens = 13 "CREATE_TOKENS",
        /// Describe delegation tokens.
        DescribeTokens = 14 "DESCRIBE_TOKENS",
    }
);

coded!(
    /// Whether an ACL allows or denies.
    Permission {
        /// Denies; wins over any allow.
        Deny = 2 "DENY",
        /// Allows.
        Allow = 3 "ALLOW",
    }
);

/// Kafka's code for "any" in a filter's resource type, pattern type, operation and permission.
pub const ANY: i8 = 1;
/// Kafka's code for the MATCH pattern filter: every pattern that would apply to the name.
pub const MATCH: i8 = 2;

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Acl {
    /// The resource's type.
    pub resource_type: ResourceType,
    /// The resource's name (or prefix).
    pub name: String,
    /// How `name` matches.
    pub pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`, or [`WILDCARD_PRINCIPAL`].
    pub principal: String,
    /// The client's address, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

impl Acl {
    /// Whether this ACL's resource pattern covers the resource `name` of `resource_type`.
    pub fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }

    /// Whether this ACL names `principal` connecting from `host`.
    pub fn names(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == host || self.host == WILDCARD)
    }

    /// Checks a new ACL as Kafka's controller does before storing it: a concrete principal
    /// `Type:name`, a non-empty name, and the cluster named [`CLUSTER_NAME`].
    ///
    /// # Errors
    /// Kafka's reason.
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        if self.name.is_empty() {
            return Err(InvalidAcl::EmptyName);
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Err(InvalidAcl::ClusterName);
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => return Err(InvalidAcl::Principal(self.principal.clone())),
        }
        if self.host.is_empty() {
            return Err(InvalidAcl::EmptyHost);
        }
        Ok(())
    }
}

/// How a filter matches resource patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type; the name, if given, compared exactly.
    Any,
    /// Every pattern that applies to the name (literal equal or `*`, prefixes of it).
    Match,
    /// This pattern type; the name, if given, compared exactly.
    Exactly(PatternType),
}

/// A filter of ACLs (DescribeAcls, DeleteAcls): `None` matches anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type, or any.
    pub resource_type: Option<ResourceType>,
    /// The resource name, or any.
    pub name: Option<String>,
    /// How patterns match.
    pub pattern: PatternFilter,
    /// The principal, or any.
    pub principal: Option<String>,
    /// The host, or any.
    pub host: Option<String>,
    /// The operation, or any.
    pub operation: Option<Operation>,
    /// The permission, or any.
    pub permission: Option<Permission>,
}

/// Why a new ACL is refused: Kafka's `INVALID_REQUEST` messages.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAcl {
    /// A field's code that names nothing.
    #[error("Invalid {field} {code}")]
    Code {
        /// `resourceType`, `patternType`, `operation` or `permissionType`.
        field: &'static str,
        /// The code.
        code: i8,
    },
    /// An empty resource name.
    #[error("Resource name should not be empty")]
    EmptyName,
    /// A cluster ACL not on [`CLUSTER_NAME`].
    #[error("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")]
    ClusterName,
    /// A principal that is not `Type:name`.
    #[error(
        "Could not parse principal from `{0}` (no colon is found separating the principal type \
         from the principal name)"
    )]
    Principal(String),
    /// An empty host.
    #[error("Host should not be empty")]
    EmptyHost,
}

/// A filter field's code that is neither ANY nor a concrete value (UNKNOWN, or out of range).
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownElement(pub &'static str);

impl AclFilter {
    /// A filter from its wire codes; Kafka refuses a filter with an UNKNOWN element.
    pub fn from_codes(
        resource_type: i8,
        name: Option<String>,
        pattern: i8,
        principal: Option<String>,
        host: Option<String>,
        operation: i8,
        permission: i8,
    ) -> Result<Self, UnknownElement> {
        fn any_or<T>(
            code: i8,
            what: &'static str,
            f: fn(i8) -> Option<T>,
        ) -> Result<Option<T>, UnknownElement> {
            if code == ANY {
                Ok(None)
            } else {
                f(code).map(Some).ok_or(UnknownElement(what))
            }
        }
        let pattern = match pattern {
            ANY => PatternFilter::Any,
            MATCH => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code).ok_or(UnknownElement("pattern type"))?,
            ),
        };
        Ok(AclFilter {
            resource_type: any_or(resource_type, "resource type", ResourceType::from_code)?,
            name,
            pattern,
            principal,
            host,
            operation: any_or(operation, "operation", Operation::from_code)?,
            permission: any_or(permission, "permission type", Permission::from_code)?,
        })
    }

    /// Whether `acl` matches, by Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, acl: &Acl) -> bool {
        self.resource_type.is_none_or(|t| t == acl.resource_type)
            && self.matches_pattern(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }

    fn matches_pattern(&self, acl: &Acl) -> bool {
        if let PatternFilter::Exactly(p) = self.pattern {
            if p != acl.pattern {
                return false;
            }
        }
        let Some(name) = &self.name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == acl.name,
            PatternFilter::Match => match acl.pattern {
                PatternType::Literal => *name == acl.name || acl.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&acl.name),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pattern: PatternType, op: Operation) -> Acl {
        Acl {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn codes_round_trip_and_any_unknown_are_not_values() {
        for code in 2..=14 {
            assert_eq!(Operation::from_code(code).unwrap().code(), code);
        }
        assert_eq!(Operation::from_code(0), None);
        assert_eq!(Operation::from_code(ANY), None);
        assert_eq!(ResourceType::from_code(4), Some(ResourceType::Cluster));
        assert_eq!(PatternType::from_code(MATCH), None);
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.name()), Some(*op));
        }
        assert_eq!(
            Operation::from_name("describe-configs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            ResourceType::from_name("TRANSACTIONAL_ID"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(Permission::from_name("ANY"), None);
        assert_eq!(
            AclFilter::from_codes(2, None, 0, None, None, 1, 1),
            Err(UnknownElement("pattern type"))
        );
    }

    #[test]
    fn patterns_cover_as_kafka_matches_them() {
        let lit = acl("orders", PatternType::Literal, Operation::Read);
        let star = acl("*", PatternType::Literal, Operation::Read);
        let pre = acl("ord", PatternType::Prefixed, Operation::Read);
        assert!(lit.covers(ResourceType::Topic, "orders"));
        assert!(!lit.covers(ResourceType::Topic, "orders2"));
        assert!(!lit.covers(ResourceType::Group, "orders"));
        assert!(star.covers(ResourceType::Topic, "anything"));
        assert!(pre.covers(ResourceType::Topic, "orders2"));
        assert!(!pre.covers(ResourceType::Topic, "or"));

        let by_match =
            AclFilter::from_codes(2, Some("orders".into()), MATCH, None, None, 1, 1).unwrap();
        assert!(by_match.matches(&lit) && by_match.matches(&star) && by_match.matches(&pre));
        let exact = AclFilter::from_codes(2, Some("ord".into()), 4, None, None, 1, 1).unwrap();
        assert!(exact.matches(&pre) && !exact.matches(&lit));
        let any = AclFilter::from_codes(1, Some("orders".into()), ANY, None, None, 1, 1).unwrap();
        assert!(any.matches(&lit) && !any.matches(&star) && !any.matches(&pre));
        let by_op =
            AclFilter::from_codes(1, None, ANY, Some("User:bob".into()), None, 3, 1).unwrap();
        assert!(!by_op.matches(&lit));
    }

    #[test]
    fn new_acls_are_validated_as_kafka_validates_them() {
        let mut a = acl("orders", PatternType::Literal, Operation::Read);
        assert_eq!(a.validate(), Ok(()));
        a.principal = "alice".into();
        assert!(a
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("Could not parse principal from `alice`"));
        a.principal = "User:alice".into();
        a.resource_type = ResourceType::Cluster;
        assert_eq!(a.validate(), Err(InvalidAcl::ClusterName));
        assert!(InvalidAcl::ClusterName
            .to_string()
            .contains("kafka-cluster"));
        a.name = String::new();
        assert_eq!(a.validate(), Err(InvalidAcl::EmptyName));
    }
}
