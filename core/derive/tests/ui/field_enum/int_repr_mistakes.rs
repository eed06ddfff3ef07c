use tablekit::FieldEnum;

const TEN: isize = 10;

#[derive(FieldEnum)]
#[field_enum(repr = "int", rename_all = "snake_case")]
enum Priority {
    #[field_enum(rename = "low")]
    Low = 1,
    Shifted = 1 << 2,
    Named = TEN,
    Huge = 3_000_000_000,
    Max = 2147483647,
    Next,
}

fn main() {}
