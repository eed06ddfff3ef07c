use tablekit::FieldEnum;

#[derive(FieldEnum)]
#[field_enum(repr = "number")]
enum Priority {
    Low,
    High,
}

#[derive(FieldEnum)]
#[field_enum(rename_all = "Title Case")]
enum Status {
    Placed,
    Shipped,
}

fn main() {}
