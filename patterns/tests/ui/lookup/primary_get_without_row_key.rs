use tablekit_core::MemoryStore;
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}",
         crate = "tablekit_core")]
#[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
#[index(name = "by_id", table = "EmployeesById", partition_key = "all", row_key = "{id:06}")]
#[index_entity(name = "last_name", key = "{last_name}")]
struct Employee {
    department: String,
    id: u32,
    last_name: String,
    email: String,
}

// `get` and `delete` need every field; the partition alone is read with `all`.
async fn partial(employees: IndexedTable<Employee, MemoryStore>) {
    let _ = employees.primary().key("Sales").get().await;
}

fn main() {}
