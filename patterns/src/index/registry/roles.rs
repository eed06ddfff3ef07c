//! A declaration's roles: the one trait each declaration's folder implements, kept apart
//! from the list of declarations ([`super`]) so a folder that implements it imports
//! nothing that names the other declarations.

use tablekit_core::TableStore;

use super::super::operation::IndexOperation;
use super::super::record::Target;
use super::super::upkeep::{Applies, Kept, Upkeep};
use super::super::write::declaration::{ReadSteps, WriteSteps};

/// A declaration's roles. Each hook has nothing by default.
pub(crate) trait Declaration<S: TableStore + Clone + 'static>: Sync {
    /// The attribute that declares it (`index`, `index_entity`, …): how a role of a
    /// write's batch names the declaration that reads its refusal.
    fn attribute(&self) -> &'static str;

    /// Its steps on the write path.
    fn write(&self) -> Option<&dyn WriteSteps<S>> {
        None
    }

    /// What it does to an entity on its way to the reader.
    fn read(&self) -> Option<&dyn ReadSteps<S>> {
        None
    }

    /// The upkeep of what it keeps that no target names.
    fn upkeep(&self) -> Option<&dyn Upkeep<S>> {
        None
    }

    /// `operation`, if it is one of its own, as it applies.
    fn applies<'a>(&self, _operation: &'a IndexOperation) -> Option<&'a dyn Applies<S>> {
        None
    }

    /// `target`, if it is one of its own, as the audit and a backfill keep it.
    fn kept<'a>(&self, _target: &'a Target) -> Option<&'a dyn Kept<S>> {
        None
    }
}

/// Describes a declaration from its folder, once: its roles (`Declaration<S>` for its
/// unit type: the steps it takes, the operations it applies, the targets it keeps) and
/// its stored types, submitted to the registry (the codecs of its targets and
/// operations, and how it lays out when it is described by its attribute alone).
///
/// ```text
/// declaration! {
///     write::Counts {
///         attribute: ATTRIBUTE,
///         steps: [write, upkeep],
///         targets: [CountTarget],
///         operations: [SyncCount],
///         lays_out: Layout,
///     }
/// }
/// ```
macro_rules! declaration {
    (
        $roles:ty {
            attribute: $attribute:expr,
            steps: [$($step:ident),* $(,)?],
            targets: [$($target:ty),* $(,)?],
            operations: [$($operation:ty),* $(,)?]
            $(, lays_out: $lays_out:expr)? $(,)?
        }
    ) => {
        $(inventory::submit! { $crate::index::Target::codec::<$target>($attribute) })*
        $(inventory::submit! {
            $crate::index::IndexOperation::codec::<$operation>($attribute)
        })*
        $(inventory::submit! {
            $crate::index::record::LaidOut { attribute: $attribute, lays_out: &$lays_out }
        })?

        impl<S: tablekit_core::TableStore + Clone + 'static>
            $crate::index::registry::roles::Declaration<S> for $roles
        {
            fn attribute(&self) -> &'static str {
                $attribute
            }

            $($crate::index::registry::roles::declaration!(@step $step);)*

            #[allow(unused_variables)]
            fn applies<'a>(
                &self,
                operation: &'a $crate::index::IndexOperation,
            ) -> Option<&'a dyn $crate::index::upkeep::Applies<S>> {
                let found: Option<&'a dyn $crate::index::upkeep::Applies<S>> = None;
                found $(.or_else(|| operation.get::<$operation>().map(|o| o as _)))*
            }

            #[allow(unused_variables)]
            fn kept<'a>(
                &self,
                target: &'a $crate::index::Target,
            ) -> Option<&'a dyn $crate::index::upkeep::Kept<S>> {
                let found: Option<&'a dyn $crate::index::upkeep::Kept<S>> = None;
                found $(.or_else(|| target.get::<$target>().map(|t| t as _)))*
            }
        }
    };
    (@step write) => {
        fn write(&self) -> Option<&dyn $crate::index::write::declaration::WriteSteps<S>> {
            Some(self)
        }
    };
    (@step read) => {
        fn read(&self) -> Option<&dyn $crate::index::write::declaration::ReadSteps<S>> {
            Some(self)
        }
    };
    (@step upkeep) => {
        fn upkeep(&self) -> Option<&dyn $crate::index::upkeep::Upkeep<S>> {
            Some(self)
        }
    };
}
pub(crate) use declaration;
