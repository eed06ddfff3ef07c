//! An application crate that depends on tablekit under another name (`tk`) and tells the
//! derives so with `#[entity(crate = "tk")]`.

use tk::{Entity, EntityKind, Projection};

/// A customer, declared through the renamed crate.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    crate = "tk",
    table = "Customers",
    partition_key = "{region}",
    row_key = "cust_{id:08}"
)]
#[index(
    name = "by_name",
    table = "CustomersByName",
    partition_key = "{region}",
    row_key = "name_{name}"
)]
pub struct Customer {
    /// The region.
    pub region: String,
    /// The id.
    pub id: u64,
    /// The name.
    pub name: String,
}

/// A region's summary, in the same table.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    crate = "tk",
    table = "Customers",
    partition_key = "{region}",
    row_key = "summary"
)]
pub struct RegionSummary {
    /// The region.
    pub region: String,
    /// How many customers it has.
    pub customers: u32,
}

/// Everything the Customers table holds.
#[derive(EntityKind, Clone, Debug, PartialEq)]
#[entity(crate = "tk")]
pub enum CustomerRecord {
    /// A customer.
    Customer(Customer),
    /// A region summary.
    Summary(RegionSummary),
}

/// A customer's name alone.
#[derive(Projection, Clone, Debug, PartialEq)]
#[entity(crate = "tk")]
pub struct CustomerName {
    /// The name.
    pub name: String,
}
