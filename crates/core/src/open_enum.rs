//! Names a saved format knows, plus the ones a later rocforge may write.
//!
//! A manifest, index or receipt comes from whichever rocforge wrote it. A field such as a
//! capability or the runtime a build ran in is a closed set today and an open one over time:
//! an older reader must keep a name it does not know (to show it, to refuse to act on it),
//! not fail on the whole file. [`open_enum!`] writes that type once: the known names as
//! variants, `Other(String)` for the rest, and text that reads and writes as the plain string
//! the field held before it was typed, so files keep their bytes.

/// Declares an enum of known names with an `Other(String)` variant for the rest.
///
/// ```
/// rocforge_core::open_enum! {
///     /// Where a build ran.
///     pub enum Place {
///         /// On a laptop.
///         Laptop = "laptop",
///     }
///     description = "Where a build ran: `laptop`; other names are kept as written.";
/// }
/// assert_eq!(Place::from("laptop"), Place::Laptop);
/// assert_eq!(Place::from("moon").as_str(), "moon");
/// ```
#[macro_export]
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $name:literal, )+
        }
        description = $description:expr;
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $ty {
            $( $(#[$vmeta])* $variant, )+
            /// A name a later rocforge writes: kept as written, never acted on here.
            Other(String),
        }

        impl $ty {
            /// The names this version knows, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($name),+];

            pub fn as_str(&self) -> &str {
                match self {
                    $( $ty::$variant => $name, )+
                    $ty::Other(s) => s,
                }
            }

            /// True for a name this version knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, $ty::Other(_))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $ty {
            fn from(s: &str) -> Self {
                match s {
                    $( $name => $ty::$variant, )+
                    other => $ty::Other(other.to_string()),
                }
            }
        }

        impl $crate::__serde::Serialize for $ty {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as $crate::__serde::Deserialize>::deserialize(d)?;
                Ok($ty::from(s.as_ref()))
            }
        }

        impl $crate::__schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut $crate::__schemars::SchemaGenerator) -> $crate::__schemars::Schema {
                $crate::__schemars::json_schema!({
                    "type": "string",
                    "description": $description,
                    "examples": $ty::KNOWN,
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::open_enum! {
        /// A test set.
        pub enum Fruit {
            Apple = "apple",
            Pear = "pear",
        }
        description = "A fruit.";
    }

    #[test]
    fn known_names_are_variants_and_the_rest_keep_their_text() {
        assert_eq!(Fruit::from("pear"), Fruit::Pear);
        let other: Fruit = serde_json::from_str("\"quince\"").unwrap();
        assert_eq!(other, Fruit::Other("quince".into()));
        assert!(!other.is_known() && Fruit::Apple.is_known());
        for text in ["\"apple\"", "\"quince\""] {
            let f: Fruit = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&f).unwrap(), text);
        }
        // Escaped text (not borrowable) reads too.
        let f: Fruit = serde_json::from_str("\"\\u0061pple\"").unwrap();
        assert_eq!(f, Fruit::Apple);
        assert!(serde_json::from_str::<Fruit>("3").is_err());
        let schema = serde_json::to_value(schemars::schema_for!(Fruit)).unwrap();
        assert_eq!(schema["examples"], serde_json::json!(["apple", "pear"]));
        assert_eq!(schema["description"], "A fruit.");
    }
}
