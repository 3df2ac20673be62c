//! The lowercase words the seeds use for enums, in one place, so `Display`, `FromStr`, the JSON
//! API and the database all spell them the same way.

/// Error for a word outside a fixed vocabulary; names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {word:?} is not one of: {expected}")]
pub struct UnknownWord {
    pub what: &'static str,
    pub word: String,
    pub expected: String,
}

/// Declares an enum whose variants are spelled by fixed lowercase words.
macro_rules! word_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident ($what:literal) { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::words::UnknownWord;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err($crate::words::UnknownWord {
                        what: $what,
                        word: s.chars().take(64).collect(),
                        expected: [$($word),+].join(", "),
                    }),
                }
            }
        }
    };
}
pub(crate) use word_enum;
