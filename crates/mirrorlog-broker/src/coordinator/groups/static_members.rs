//! The static-membership map both group protocols keep (`group.instance.id` → member id), and
//! its invariant: the map and the members agree both ways.

use std::collections::HashMap;

/// The first disagreement between `map` (instance id → member id) and the members, or `None`:
/// every entry names a member holding that instance id (`instance_of(member)`: the member's
/// instance id, `None` when there is no such member), and every member with an instance id
/// (`members`: member id and instance id) is what its instance id maps to.
pub fn violation<'a>(
    map: &HashMap<String, String>,
    mut members: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    instance_of: impl Fn(&str) -> Option<Option<&'a str>>,
) -> Option<String> {
    for (instance, id) in map {
        if instance_of(id) != Some(Some(instance.as_str())) {
            return Some(format!(
                "instance id {instance:?} maps to {id:?}, which is not its member"
            ));
        }
    }
    members.find_map(|(id, instance)| {
        let i = instance?;
        (map.get(i).map(String::as_str) != Some(id))
            .then(|| format!("static member {id:?} is not what instance id {i:?} maps to"))
    })
}
