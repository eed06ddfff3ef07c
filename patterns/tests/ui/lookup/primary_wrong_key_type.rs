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

// The id is a `u32`: a string is not a value of it.
async fn wrong_type(employees: IndexedTable<Employee, MemoryStore>) {
    let _ = employees.primary().key("Sales").key("123").get().await;
}

fn main() {}
