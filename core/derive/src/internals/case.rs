//! The `rename_all` rules: how a snake_case field name becomes a property name, and how a
//! PascalCase variant name becomes a stored enum value.

/// A `rename_all` rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RenameRule {
    Lower,
    Upper,
    Pascal,
    Camel,
    Snake,
    ScreamingSnake,
    Kebab,
}

/// Every rule, as written in an attribute.
const RULES: &[(&str, RenameRule)] = &[
    ("lowercase", RenameRule::Lower),
    ("UPPERCASE", RenameRule::Upper),
    ("PascalCase", RenameRule::Pascal),
    ("camelCase", RenameRule::Camel),
    ("snake_case", RenameRule::Snake),
    ("SCREAMING_SNAKE_CASE", RenameRule::ScreamingSnake),
    ("kebab-case", RenameRule::Kebab),
];

/// The rules an enum's `rename_all` takes: every one.
pub(crate) const VARIANT_RULES: &[&str] = &[
    "snake_case",
    "kebab-case",
    "lowercase",
    "UPPERCASE",
    "camelCase",
    "PascalCase",
    "SCREAMING_SNAKE_CASE",
];

impl RenameRule {
    /// The rule written `name`.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        RULES
            .iter()
            .find(|(written, _)| *written == name)
            .map(|(_, rule)| *rule)
    }

    /// A snake_case field name under this rule (`first_name` → `FirstName`).
    pub(crate) fn apply_to_field(self, field: &str) -> String {
        let words = || field.split('_').filter(|w| !w.is_empty());
        match self {
            RenameRule::Pascal => words().map(capitalise).collect(),
            RenameRule::Camel => words()
                .enumerate()
                .map(|(i, w)| if i == 0 { w.to_owned() } else { capitalise(w) })
                .collect(),
            RenameRule::Snake => field.to_owned(),
            RenameRule::Lower => field.to_lowercase(),
            RenameRule::Upper | RenameRule::ScreamingSnake => field.to_uppercase(),
            RenameRule::Kebab => field.replace('_', "-"),
        }
    }

    /// A PascalCase variant name under this rule (`OnHold` → `on_hold`): a word starts at
    /// each upper-case letter.
    pub(crate) fn apply_to_variant(self, variant: &str) -> String {
        match self {
            RenameRule::Pascal => variant.to_owned(),
            RenameRule::Lower => variant.to_ascii_lowercase(),
            RenameRule::Upper => variant.to_ascii_uppercase(),
            RenameRule::Camel => {
                let mut chars = variant.chars();
                chars
                    .next()
                    .map(|c| c.to_lowercase().chain(chars).collect())
                    .unwrap_or_default()
            }
            RenameRule::Snake => words_joined(variant, '_'),
            RenameRule::ScreamingSnake => words_joined(variant, '_').to_ascii_uppercase(),
            RenameRule::Kebab => words_joined(variant, '-'),
        }
    }
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The words of a PascalCase name in lower case, joined by `separator`.
fn words_joined(name: &str, separator: char) -> String {
    let mut out = String::new();
    for (i, c) in name.char_indices() {
        if c.is_uppercase() && i > 0 {
            out.push(separator);
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::RenameRule;

    #[test]
    fn field_names_follow_each_rule() {
        let rule = |name| RenameRule::from_name(name).expect("a rule");
        assert_eq!(rule("PascalCase").apply_to_field("first_name"), "FirstName");
        assert_eq!(rule("camelCase").apply_to_field("first_name"), "firstName");
        assert_eq!(
            rule("snake_case").apply_to_field("first_name"),
            "first_name"
        );
        assert_eq!(rule("lowercase").apply_to_field("first_name"), "first_name");
        assert_eq!(rule("UPPERCASE").apply_to_field("id"), "ID");
    }

    #[test]
    fn variant_names_follow_each_rule() {
        let cases = [
            ("PascalCase", "OnHold"),
            ("camelCase", "onHold"),
            ("snake_case", "on_hold"),
            ("kebab-case", "on-hold"),
            ("lowercase", "onhold"),
            ("UPPERCASE", "ONHOLD"),
            ("SCREAMING_SNAKE_CASE", "ON_HOLD"),
        ];
        for (rule, expected) in cases {
            let rule = RenameRule::from_name(rule).expect("a rule");
            assert_eq!(rule.apply_to_variant("OnHold"), expected, "{rule:?}");
        }
        let snake = RenameRule::Snake;
        assert_eq!(snake.apply_to_variant("Placed"), "placed");
        assert_eq!(snake.apply_to_variant("V2Beta"), "v2_beta");
    }

    #[test]
    fn every_variant_rule_is_known() {
        for name in super::VARIANT_RULES {
            assert!(RenameRule::from_name(name).is_some(), "{name}");
        }
    }
}
