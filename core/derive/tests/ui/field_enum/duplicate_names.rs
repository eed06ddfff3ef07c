use tablekit::FieldEnum;

#[derive(FieldEnum)]
#[field_enum(rename_all = "lowercase")]
enum Status {
    OnHold,
    Onhold,
    #[field_enum(rename = "onhold")]
    Paused,
    #[field_enum(rename = "")]
    Lost,
}

fn main() {}
