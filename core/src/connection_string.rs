//! Storage connection strings (`AccountName=…;AccountKey=…;…`, `UseDevelopmentStorage=true`,
//! SAS and endpoint forms): their `KEY=VALUE` fields, read once for every service that
//! takes one (tables, queues, blobs). A leaf: it imports nothing of the crate.

/// The `KEY=VALUE` fields of a storage connection string (keys lower-cased, values
/// trimmed), and the parts that are not `KEY=VALUE`.
pub(crate) fn fields(connection: &str) -> (std::collections::HashMap<String, String>, Vec<&str>) {
    let mut fields = std::collections::HashMap::new();
    let mut malformed = Vec::new();
    for part in connection
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match part.split_once('=') {
            Some((key, value)) => {
                fields.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
            None => malformed.push(part),
        }
    }
    (fields, malformed)
}
