use tablekit::FieldEnum;

#[derive(FieldEnum)]
enum Status<const N: usize> {
    Placed,
    Shipped,
}

fn main() {}
