use tablekit::FieldEnum;

#[derive(FieldEnum)]
enum Status {
    Placed,
    Shipped(u32),
    Lost { reason: String },
}

fn main() {}
