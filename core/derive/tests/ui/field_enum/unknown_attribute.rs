use tablekit::FieldEnum;

#[derive(FieldEnum)]
#[field_enum(rename_al = "snake_case", repr = "string")]
enum Status {
    Placed,
    #[field_enum(skip)]
    Shipped,
}

fn main() {}
