use tablekit::FieldEnum;

#[derive(FieldEnum)]
enum Channel {
    Web,
    #[field_enum(other)]
    Unknown,
    #[field_enum(other)]
    Unrecognised,
}

fn main() {}
