//! The forms a run-time connection string may take, checked before anything is opened:
//! [`AnyStore::connect`](super::AnyStore::connect) and the workers' `AnyQueue::connect`
//! accept the forms they document and nothing else, and refuse the rest with a hint for
//! the near miss (`sqlite://x`, `memory`, a bare path, a storage connection string
//! without `azure:`). What a refusal shows of the string never includes a secret it may
//! hold (a storage account key, a URL's password): see [`shown`].

/// What follows the colon of a form's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Argument {
    /// Nothing: `memory:`.
    Nothing,
    /// A file's path, relative or absolute: `sqlite:app.db`, `sqlite:/var/lib/app.db`.
    /// Not empty, and not starting with `//`: `sqlite://app.db` would be the file
    /// `/app.db` at the root of the filesystem.
    Path,
    /// A storage connection string, not empty: `azure:UseDevelopmentStorage=true`.
    ConnectionString,
    /// The rest of a URL, from its `//`: `amqp://user:password@host:port/vhost`.
    Url,
}

/// One form a connection string may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// The scheme, before the first colon (`sqlite`).
    pub scheme: &'static str,
    /// What follows the colon.
    pub argument: Argument,
    /// The form as the documentation writes it (`sqlite:PATH`), for messages.
    pub written: &'static str,
}

impl Form {
    /// The form `written`, whose `scheme` is followed by `argument`.
    pub const fn new(scheme: &'static str, argument: Argument, written: &'static str) -> Self {
        Form {
            scheme,
            argument,
            written,
        }
    }
}

/// The form among `forms` that `connection` takes, and what follows its scheme's colon
/// (for [`Argument::Url`], from the `//`).
///
/// # Errors
/// Why `connection` is none of `forms`, as a sentence: a hint for a near miss (`sqlite:x`
/// for `sqlite://x`, `memory:` for `memory`, `sqlite:PATH` for a bare path, `azure:` for
/// a storage connection string without it), then the forms accepted. It quotes nothing of
/// `connection` that [`shown`] would hide.
pub fn accept<'c>(connection: &'c str, forms: &[Form]) -> Result<(Form, &'c str), String> {
    let refuse = |hint: String| Err(format!("{hint}; {}", accepted(forms)));
    if connection.is_empty() {
        return refuse("the connection string is empty".to_owned());
    }
    let scheme = connection
        .split_once(':')
        .filter(|(scheme, rest)| is_scheme(scheme) && !is_drive(scheme, rest));
    let Some((scheme, rest)) = scheme else {
        return refuse(without_scheme(connection, forms));
    };
    if let Some(form) = forms.iter().find(|f| f.scheme == scheme) {
        return match argument_problem(*form, rest) {
            None => Ok((*form, rest)),
            Some(hint) => refuse(hint),
        };
    }
    match forms.iter().find(|f| f.scheme.eq_ignore_ascii_case(scheme)) {
        Some(form) => refuse(format!("schemes are lower case: write `{}`", form.written)),
        None => refuse(format!("unknown scheme `{scheme}`")),
    }
}

/// What an error may show of a connection string: a storage connection string
/// (`azure:…`, or anything with `=`, `;`, `@` or `?`, which may hold an account key, a
/// signature or a password) as its scheme alone; anything else whole, up to 80
/// characters.
pub fn shown(connection: &str) -> String {
    let scheme = connection
        .split_once(':')
        .map(|(scheme, _)| scheme)
        .filter(|scheme| is_scheme(scheme));
    let secret = scheme.is_some_and(|s| s.eq_ignore_ascii_case("azure"))
        || connection.contains(['=', ';', '@', '?']);
    match (secret, scheme) {
        (true, Some(scheme)) => format!("{scheme}:…"),
        (true, None) => "…".to_owned(),
        (false, _) if connection.chars().count() > 80 => {
            format!("{}…", connection.chars().take(80).collect::<String>())
        }
        (false, _) => connection.to_owned(),
    }
}

/// `the forms accepted are `a`, `b` and `c``.
fn accepted(forms: &[Form]) -> String {
    let written: Vec<String> = forms.iter().map(|f| format!("`{}`", f.written)).collect();
    match written.split_last() {
        None => "no form is accepted".to_owned(),
        Some((only, [])) => format!("the form accepted is {only}"),
        Some((last, rest)) => format!("the forms accepted are {} and {last}", rest.join(", ")),
    }
}

/// Whether `text` is a URI scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Whether `scheme:rest` is a Windows path with a drive letter (`C:\data\app.db`).
fn is_drive(scheme: &str, rest: &str) -> bool {
    scheme.len() == 1 && rest.starts_with(['\\', '/'])
}

/// Why `rest` does not follow `form`'s scheme, if it does not.
fn argument_problem(form: Form, rest: &str) -> Option<String> {
    let Form {
        scheme, written, ..
    } = form;
    match form.argument {
        Argument::Nothing if rest.is_empty() => None,
        Argument::Nothing => Some(format!(
            "nothing follows the colon of `{scheme}:`: write `{written}`"
        )),
        Argument::Path => {
            let Some(after) = rest.strip_prefix("//") else {
                return rest.is_empty().then(|| {
                    format!("`{scheme}:` needs a path: write `{written}`, e.g. `{scheme}:app.db`")
                });
            };
            let path = Some(after).filter(|p| !p.is_empty() && shown(p) == *p);
            Some(match path {
                Some(absolute) if absolute.starts_with('/') => format!(
                    "`{scheme}://` is not a form of `{written}`: write `{scheme}:{absolute}` (an absolute path) or `{scheme}:relative/path`"
                ),
                Some(relative) => format!(
                    "`{scheme}://` is not a form of `{written}` (it would name `/{relative}` at the filesystem's root): write `{scheme}:{relative}` (a relative path) or `{scheme}:/abs/path`"
                ),
                None => format!(
                    "`{scheme}://` is not a form of `{written}`: write `{scheme}:relative/path` or `{scheme}:/abs/path`"
                ),
            })
        }
        Argument::ConnectionString if rest.trim().is_empty() => Some(format!(
            "`{scheme}:` needs a connection string: write `{written}`, e.g. `{scheme}:UseDevelopmentStorage=true`"
        )),
        Argument::ConnectionString => None,
        Argument::Url if rest.len() > 2 && rest.starts_with("//") => None,
        Argument::Url => Some(format!("write `{written}`")),
    }
}

/// The hint for a string without a scheme: a bare word naming a scheme, a storage
/// connection string, or a bare path.
fn without_scheme(connection: &str, forms: &[Form]) -> String {
    if let Some(form) = forms
        .iter()
        .find(|f| f.scheme.eq_ignore_ascii_case(connection))
    {
        return format!("a scheme needs its colon: write `{}`", form.written);
    }
    let form_of = |argument| forms.iter().find(|f| f.argument == argument);
    if connection.contains(['=', ';'])
        && let Some(form) = form_of(Argument::ConnectionString)
    {
        return format!(
            "a storage connection string goes after `{}:`: write `{}`",
            form.scheme, form.written
        );
    }
    match form_of(Argument::Path) {
        Some(form) if shown(connection) == connection => format!(
            "a bare path is not a connection string: write `{}:{connection}`",
            form.scheme
        ),
        Some(form) => format!(
            "a bare path is not a connection string: write `{}`",
            form.written
        ),
        None => "the connection string has no scheme".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMS: &[Form] = &[
        Form::new("sqlite", Argument::Path, "sqlite:PATH"),
        Form::new("memory", Argument::Nothing, "memory:"),
        Form::new(
            "azure",
            Argument::ConnectionString,
            "azure:CONNECTION-STRING",
        ),
        Form::new(
            "amqp",
            Argument::Url,
            "amqp://user:password@host:port/vhost",
        ),
    ];

    fn refused(connection: &str) -> String {
        accept(connection, FORMS).expect_err(connection)
    }

    #[test]
    fn the_documented_forms_are_accepted_with_their_argument() {
        let scheme_and_rest = |c| accept(c, FORMS).map(|(form, rest)| (form.scheme, rest));
        assert_eq!(scheme_and_rest("memory:"), Ok(("memory", "")));
        assert_eq!(scheme_and_rest("sqlite:app.db"), Ok(("sqlite", "app.db")));
        assert_eq!(
            scheme_and_rest("sqlite:/var/a.db"),
            Ok(("sqlite", "/var/a.db"))
        );
        assert_eq!(
            scheme_and_rest("sqlite:C:\\data\\a.db"),
            Ok(("sqlite", "C:\\data\\a.db"))
        );
        assert_eq!(
            scheme_and_rest("azure:UseDevelopmentStorage=true"),
            Ok(("azure", "UseDevelopmentStorage=true"))
        );
        assert_eq!(
            scheme_and_rest("amqp://guest:guest@localhost:5672/%2f"),
            Ok(("amqp", "//guest:guest@localhost:5672/%2f"))
        );
    }

    #[test]
    fn every_refusal_lists_the_forms_accepted() {
        for connection in ["", "memory", "sqlite://x.db", "postgres://x", "app.db"] {
            let reason = refused(connection);
            assert!(
                reason.ends_with(
                    "the forms accepted are `sqlite:PATH`, `memory:`, `azure:CONNECTION-STRING` and `amqp://user:password@host:port/vhost`"
                ),
                "{reason}"
            );
        }
    }

    #[test]
    fn a_sqlite_url_is_refused_with_the_path_forms() {
        let reason = refused("sqlite://orders.db");
        assert!(
            reason.contains("write `sqlite:orders.db` (a relative path) or `sqlite:/abs/path`"),
            "{reason}"
        );
        let reason = refused("sqlite:///var/lib/orders.db");
        assert!(
            reason.contains("write `sqlite:/var/lib/orders.db` (an absolute path)"),
            "{reason}"
        );
        assert!(refused("sqlite:").contains("`sqlite:` needs a path"));
        assert!(refused("sqlite://").contains("write `sqlite:relative/path`"));
    }

    #[test]
    fn near_misses_get_the_form_they_meant() {
        assert!(refused("memory").contains("write `memory:`"));
        assert!(refused("memory:x").contains("write `memory:`"));
        assert!(refused("sqlite").contains("write `sqlite:PATH`"));
        assert!(refused("Memory:").contains("schemes are lower case: write `memory:`"));
        assert!(refused("amqp:localhost").contains("write `amqp://"));
        assert!(refused("azure:").contains("needs a connection string"));
        assert!(refused("postgres://x").contains("unknown scheme `postgres`"));
        let reason = refused("orders.db");
        assert!(
            reason.contains("a bare path is not a connection string: write `sqlite:orders.db`"),
            "{reason}"
        );
        let reason = refused("AccountName=a;AccountKey=secret");
        assert!(reason.contains("goes after `azure:`"), "{reason}");
    }

    #[test]
    fn secrets_are_never_shown() {
        for (connection, expected) in [
            ("azure:AccountName=a;AccountKey=secret", "azure:…"),
            ("azure:secret", "azure:…"),
            ("AccountName=a;AccountKey=secret", "…"),
            (
                "DefaultEndpointsProtocol=https;AccountKey=secret;TableEndpoint=https://x",
                "…",
            ),
            ("amqp://user:secret@host/%2f", "amqp:…"),
            ("kafka://somewhere", "kafka://somewhere"),
            ("sqlite://orders.db", "sqlite://orders.db"),
        ] {
            assert_eq!(shown(connection), expected, "{connection}");
        }
        for connection in [
            "AccountName=a;AccountKey=secret",
            "DefaultEndpointsProtocol=https;AccountKey=secret;TableEndpoint=https://x",
            "sqlite://a;AccountKey=secret",
            "azur:AccountKey=secret",
        ] {
            assert!(!refused(connection).contains("secret"), "{connection}");
        }
    }
}
