use tablekit::FieldEnum;

#[derive(FieldEnum)]
struct Status {
    code: u32,
}

fn main() {}
