//! DescribeAcls, CreateAcls, DeleteAcls (KIP-140, prefixed patterns KIP-290), as Kafka's
//! `KafkaApis` answers them: describing needs DESCRIBE on the cluster, changing needs ALTER on it
//! (`CLUSTER_AUTHORIZATION_FAILED` otherwise); with no authorizer configured every answer is
//! `SECURITY_DISABLED`. A filter or new ACL with an UNKNOWN or ANY element where a value is needed
//! is `INVALID_REQUEST` with Kafka's message; ACLs are stored durably before the answer
//! (`acl/authorizer.rs`).

use super::str_bytes;
use crate::acl::{
    Acl, AclFilter, Authorizer, InvalidAcl, Operation, PatternType, Permission, ResourceType,
    UnknownElement,
};
use crate::broker::Shared;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka's message with `SECURITY_DISABLED`.
const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// The authorizer, or the error every answer carries: none configured, or the session may not
/// do `op` on the cluster.
fn gate<'a>(
    b: &'a Shared,
    who: &Session,
    op: Operation,
) -> Result<&'a Authorizer, (ResponseError, &'static str)> {
    let Some(a) = b.authorizer.as_ref() else {
        return Err((ResponseError::SecurityDisabled, NO_AUTHORIZER));
    };
    if who.may_cluster(b, op) {
        Ok(a)
    } else {
        Err((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ))
    }
}

fn text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

fn filter_message(e: &UnknownElement) -> String {
    format!("The filter contained an UNKNOWN {}", e.0)
}

/// DescribeAcls: every ACL the filter matches, grouped by resource pattern.
pub fn describe_acls(b: &Shared, who: &Session, r: &DescribeAclsRequest) -> ResponseKind {
    let mut resp = DescribeAclsResponse::default();
    let result = gate(b, who, Operation::Describe)
        .map_err(|(code, m)| (code, m.to_string()))
        .and_then(|a| {
            AclFilter::from_codes(
                r.resource_type_filter,
                text(&r.resource_name_filter),
                r.pattern_type_filter,
                text(&r.principal_filter),
                text(&r.host_filter),
                r.operation,
                r.permission_type,
            )
            .map(|f| a.describe(&f))
            .map_err(|e| (ResponseError::InvalidRequest, filter_message(&e)))
        });
    match result {
        Ok(acls) => {
            resp.error_message = None;
            // Sorted by resource pattern (the set's order), so each pattern is one entry.
            for acl in acls {
                let same = resp
                    .resources
                    .last()
                    .is_some_and(|last: &DescribeAclsResource| {
                        last.resource_type == acl.resource_type.code()
                            && last.resource_name.as_str() == acl.name
                            && last.pattern_type == acl.pattern.code()
                    });
                if !same {
                    let mut res = DescribeAclsResource::default();
                    res.resource_type = acl.resource_type.code();
                    res.resource_name = str_bytes(&acl.name);
                    res.pattern_type = acl.pattern.code();
                    resp.resources.push(res);
                }
                let mut d = AclDescription::default();
                d.principal = str_bytes(&acl.principal);
                d.host = str_bytes(&acl.host);
                d.operation = acl.operation.code();
                d.permission_type = acl.permission.code();
                if let Some(last) = resp.resources.last_mut() {
                    last.acls.push(d);
                }
            }
        }
        Err((code, message)) => {
            resp.error_code = code.code();
            resp.error_message = Some(str_bytes(&message));
        }
    }
    ResponseKind::DescribeAcls(resp)
}

/// A requested ACL as ours, or why Kafka answers `INVALID_REQUEST`.
fn new_acl(c: &AclCreation) -> Result<Acl, InvalidAcl> {
    let code = |field, code| InvalidAcl::Code { field, code };
    let acl = Acl {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| code("resourceType", c.resource_type))?,
        name: c.resource_name.to_string(),
        pattern: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| code("patternType", c.resource_pattern_type))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation)
            .ok_or_else(|| code("operation", c.operation))?,
        permission: Permission::from_code(c.permission_type)
            .ok_or_else(|| code("permissionType", c.permission_type))?,
    };
    acl.validate()?;
    Ok(acl)
}

/// CreateAcls: each creation valid or refused on its own; the valid ones stored together.
pub fn create_acls(b: &Shared, who: &Session, r: CreateAclsRequest) -> ResponseKind {
    let mut resp = CreateAclsResponse::default();
    let result = |code: ResponseError, message: &str| {
        let mut x = AclCreationResult::default();
        x.error_code = code.code();
        x.error_message = Some(str_bytes(message));
        x
    };
    let a = match gate(b, who, Operation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            resp.results = r.creations.iter().map(|_| result(code, message)).collect();
            return ResponseKind::CreateAcls(resp);
        }
    };
    let checked: Vec<Result<Acl, InvalidAcl>> = r.creations.iter().map(new_acl).collect();
    let valid: Vec<Acl> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        a.create(&valid).map_err(|e| e.to_string())
    };
    resp.results = checked
        .iter()
        .map(|c| match (c, &stored) {
            (Err(e), _) => result(ResponseError::InvalidRequest, &e.to_string()),
            (Ok(_), Err(m)) => result(ResponseError::UnknownServerError, m),
            (Ok(acl), Ok(())) => {
                tracing::info!(principal = %who.principal, ?acl, "ACL created");
                let mut x = AclCreationResult::default();
                x.error_message = None;
                x
            }
        })
        .collect();
    ResponseKind::CreateAcls(resp)
}

/// DeleteAcls: per filter, the ACLs it removed.
pub fn delete_acls(b: &Shared, who: &Session, r: &DeleteAclsRequest) -> ResponseKind {
    let mut resp = DeleteAclsResponse::default();
    let failed = |code: ResponseError, message: &str| {
        let mut x = DeleteAclsFilterResult::default();
        x.error_code = code.code();
        x.error_message = Some(str_bytes(message));
        x
    };
    let a = match gate(b, who, Operation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            resp.filter_results = r.filters.iter().map(|_| failed(code, message)).collect();
            return ResponseKind::DeleteAcls(resp);
        }
    };
    let filters: Vec<Result<AclFilter, UnknownElement>> = r
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_codes(
                f.resource_type_filter,
                text(&f.resource_name_filter),
                f.pattern_type_filter,
                text(&f.principal_filter),
                text(&f.host_filter),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = filters
        .iter()
        .filter_map(|f| f.as_ref().ok())
        .cloned()
        .collect();
    let mut removed = match a.delete(&valid) {
        Ok(r) => r.into_iter(),
        Err(e) => {
            let m = e.to_string();
            resp.filter_results = r
                .filters
                .iter()
                .map(|_| failed(ResponseError::UnknownServerError, &m))
                .collect();
            return ResponseKind::DeleteAcls(resp);
        }
    };
    for f in &filters {
        let out = match f {
            Err(e) => failed(ResponseError::InvalidRequest, &filter_message(e)),
            Ok(_) => {
                let mut x = DeleteAclsFilterResult::default();
                x.error_message = None;
                for acl in removed.next().unwrap_or_default() {
                    tracing::info!(principal = %who.principal, ?acl, "ACL deleted");
                    let mut m = DeleteAclsMatchingAcl::default();
                    m.error_message = None;
                    m.resource_type = acl.resource_type.code();
                    m.resource_name = str_bytes(&acl.name);
                    m.pattern_type = acl.pattern.code();
                    m.principal = str_bytes(&acl.principal);
                    m.host = str_bytes(&acl.host);
                    m.operation = acl.operation.code();
                    m.permission_type = acl.permission.code();
                    x.matching_acls.push(m);
                }
                x
            }
        };
        resp.filter_results.push(out);
    }
    ResponseKind::DeleteAcls(resp)
}
