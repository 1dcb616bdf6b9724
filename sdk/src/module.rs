//! [`Module`] and [`Capability`]: what an author declares.
//!
//! Design decisions:
//!
//! - **The types are the schema.** A capability's input and output are Rust
//!   types; their JSON Schemas are derived with schemars, so the descriptor
//!   cannot drift from what the handler actually accepts and returns.
//! - **Input is checked against the schema and the type.** Deserializing
//!   into the input type checks what the type says; a schema that says more
//!   (a pattern, a length, a range) is also checked, before; and a failed
//!   deserialization is reported as every schema violation, as the host
//!   would (see `input_check`). A module run without a host gets the same
//!   answers.
//! - Declaration mistakes (an input schema whose root is not an object) are
//!   programmer errors and panic when the capability is built, so they show
//!   up on the author's first run, not in an agent's call.

use std::fmt;

use modproto::{
    Access, BinaryDecl, Descriptor, Effects, Example, KnowledgeDoc, Network, Operation, RootDecl,
    RootKind, Semantics,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Ctx, ModError};

type Handler = Box<dyn Fn(&mut Ctx, &Value) -> Result<Value, HandlerFailure>>;

/// Why a handler returned no output.
pub(crate) enum HandlerFailure {
    /// The input did not deserialize into the capability's input type.
    Decode(String),
    /// The capability ran and failed.
    Failed(ModError),
}

/// A module: its identity, roots and capabilities. Build it, then [`Module::serve`].
pub struct Module {
    descriptor: Descriptor,
    handlers: Vec<(String, Handler)>,
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("descriptor", &self.descriptor)
            .finish_non_exhaustive()
    }
}

impl Module {
    /// `id`: lowercase ASCII letters, digits, `-`, `_`; `version`: semver.
    pub fn new(id: &str, version: &str) -> Self {
        Module {
            descriptor: Descriptor {
                id: id.to_owned(),
                version: version.to_owned(),
                contract_version: None,
                title: String::new(),
                description: String::new(),
                roots: Vec::new(),
                binaries: Vec::new(),
                capabilities: Vec::new(),
                operations: Vec::new(),
                knowledge: Default::default(),
                warnings: Vec::new(),
            },
            handlers: Vec::new(),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.descriptor.title = title.to_owned();
        self
    }

    pub fn description(mut self, description: &str) -> Self {
        self.descriptor.description = description.to_owned();
        self
    }

    /// Declare the contract this module was built for (`"2.0.0"` to make
    /// [`Module::operation`]s binding). Absent means contract 1.
    pub fn contract_version(mut self, version: &str) -> Self {
        self.descriptor.contract_version = Some(version.to_owned());
        self
    }

    /// Declare a root the module may be granted. The host decides the path.
    pub fn root(mut self, name: &str, kind: RootKind, access: Access, description: &str) -> Self {
        self.descriptor.roots.push(RootDecl {
            name: name.to_owned(),
            kind,
            description: description.to_owned(),
            access: Some(access),
        });
        self
    }

    /// Declare an external program the host may provide.
    pub fn binary(mut self, name: &str, description: &str) -> Self {
        self.descriptor.binaries.push(BinaryDecl {
            name: name.to_owned(),
            description: description.to_owned(),
        });
        self
    }

    pub fn capability(mut self, capability: Capability) -> Self {
        self.handlers
            .push((capability.declaration.id.clone(), capability.handler));
        self.descriptor.capabilities.push(capability.declaration);
        self
    }

    /// Contract 2: a product operation carried out by `capability`.
    pub fn operation(mut self, id: &str, capability: &str, semantics: Semantics) -> Self {
        self.descriptor.operations.push(Operation {
            id: id.to_owned(),
            capability: capability.to_owned(),
            semantics,
        });
        self
    }

    /// A knowledge overlay (always relevant), shipped beside the module.
    pub fn overlay(mut self, doc: KnowledgeDoc) -> Self {
        self.descriptor.knowledge.overlays.push(doc);
        self
    }

    /// A knowledge skill (loaded on demand, referenced by capabilities).
    pub fn skill(mut self, doc: KnowledgeDoc) -> Self {
        self.descriptor.knowledge.skills.push(doc);
        self
    }

    /// Something the module wants to say about its own health.
    pub fn warning(mut self, warning: &str) -> Self {
        self.descriptor.warnings.push(warning.to_owned());
        self
    }

    /// The descriptor `describe` answers with.
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    pub(crate) fn handler(&self, capability: &str) -> Option<&Handler> {
        self.handlers
            .iter()
            .find(|(id, _)| id == capability)
            .map(|(_, h)| h)
    }
}

/// One capability: declaration plus handler.
pub struct Capability {
    declaration: modproto::Capability,
    handler: Handler,
    /// Whether `effects.network` was declared on its own
    /// ([`Capability::network_hosts`], [`Capability::any_public_host`]), so
    /// that [`Capability::effects`] keeps it.
    network_declared: bool,
}

impl fmt::Debug for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capability")
            .field("declaration", &self.declaration)
            .finish_non_exhaustive()
    }
}

impl Capability {
    /// A capability whose input `I` and output `O` schemas are derived.
    ///
    /// # Panics
    ///
    /// When `I`'s schema is not an object schema (the protocol requires one;
    /// use a struct, or [`NoInput`] for none).
    pub fn new<I, O, F>(id: &str, handler: F) -> Self
    where
        I: DeserializeOwned + JsonSchema,
        O: Serialize + JsonSchema,
        F: Fn(&mut Ctx, I) -> Result<O, ModError> + 'static,
    {
        let input_schema = schema_of::<I>();
        assert!(
            input_schema.get("type").and_then(Value::as_str) == Some("object"),
            "capability {id}: the input type's JSON Schema must have an object root, got {input_schema}"
        );
        let handler: Handler = Box::new(move |ctx, input| {
            let input = I::deserialize(input).map_err(|e| HandlerFailure::Decode(e.to_string()))?;
            let output = handler(ctx, input).map_err(HandlerFailure::Failed)?;
            serde_json::to_value(output).map_err(|e| {
                HandlerFailure::Failed(ModError::failed(format!("serializing the output: {e}")))
            })
        });
        Capability {
            declaration: modproto::Capability {
                id: id.to_owned(),
                title: String::new(),
                description: String::new(),
                input_schema,
                output_schema: Some(schema_of::<O>()),
                effects: Effects::default(),
                skills: Vec::new(),
                examples: Vec::new(),
            },
            handler,
            network_declared: false,
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.declaration.title = title.to_owned();
        self
    }

    /// What it does, when to use it, what it returns: an agent reads this.
    pub fn description(mut self, description: &str) -> Self {
        self.declaration.description = description.to_owned();
        self
    }

    /// What it may do beyond computing. Declare every root it touches.
    ///
    /// A network declared with [`Capability::network_hosts`] or
    /// [`Capability::any_public_host`] is kept when `effects.network` is
    /// left at its default (none); secrets are added to those declared
    /// with [`Capability::secrets`], each name checked as there.
    ///
    /// # Panics
    ///
    /// When `effects.network` is a different network than the one already
    /// declared on its own, or a name in `effects.secrets` is not one the
    /// host can grant.
    pub fn effects(mut self, effects: Effects) -> Self {
        let before = std::mem::replace(&mut self.declaration.effects, effects);
        let given = std::mem::replace(&mut self.declaration.effects.secrets, before.secrets);
        self = self.secrets(given);
        let declared = before.network;
        if self.network_declared {
            let given = std::mem::replace(&mut self.declaration.effects.network, declared);
            if given != Network::None {
                self = self.declare_network(given);
            }
        }
        self
    }

    /// Set `effects.network`, refusing a second, different declaration
    /// (which of two the author meant cannot be guessed).
    pub(crate) fn declare_network(mut self, network: Network) -> Self {
        let current = &self.declaration.effects.network;
        assert!(
            !self.network_declared || *current == network,
            "capability {}: effects.network is declared twice, as {} and as {}; keep one",
            self.declaration.id,
            current.summary(),
            network.summary()
        );
        self.declaration.effects.network = network;
        self.network_declared = true;
        self
    }

    /// The secrets its calls need, by name (`GITHUB_TOKEN`): each call gets
    /// every one the operator granted as an environment variable
    /// ([`crate::Ctx::secret`]), and the host refuses a call when one is not
    /// granted. Declare only what the capability uses: the approval question
    /// names them.
    ///
    /// # Panics
    ///
    /// When a name is not one the host can grant (upper case, digits and
    /// `_`, not a variable the host sets itself, see
    /// [`modproto::check_secret_name`]), naming the name probably meant.
    pub fn secrets<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for name in names {
            let name = name.as_ref();
            if let Err(error) = modproto::check_secret_name(name) {
                panic!("capability {}: {error}", self.declaration.id);
            }
            let declared = &mut self.declaration.effects.secrets;
            if !declared.iter().any(|s| s == name) {
                declared.push(name.to_owned());
            }
        }
        self
    }

    /// The capability's id.
    pub(crate) fn id(&self) -> &str {
        &self.declaration.id
    }

    /// An input that must succeed on any valid grant; conformance runs it.
    pub fn example(mut self, description: &str, input: Value) -> Self {
        self.declaration.examples.push(Example {
            description: description.to_owned(),
            input,
        });
        self
    }

    /// A knowledge skill relevant to this capability.
    pub fn skill(mut self, id: &str) -> Self {
        self.declaration.skills.push(id.to_owned());
        self
    }
}

/// The input of a capability that takes none: `{}`.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

/// Effects that read the named roots and nothing else.
pub fn reads(roots: &[&str], cost: modproto::Cost) -> Effects {
    Effects {
        reads: roots.iter().map(|r| (*r).to_owned()).collect(),
        cost,
        ..Effects::default()
    }
}

/// The JSON Schema of `T` in the vocabulary every provider and MCP client
/// accepts (see [`portable_settings`]), without the `title` key (noise in a
/// tool definition).
fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = portable_settings()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
    }
    schema
}

/// Draft 2020-12 with no `$schema` key (providers reject or ignore it; the
/// host validates as 2020-12 anyway) and only standard formats: schemars
/// describes `u64` as `"format": "uint64", "minimum": 0`; the transform
/// drops the format at generation time, so an unsigned integer is
/// `"type": "integer", "minimum": 0` and nothing is rewritten after the fact.
fn portable_settings() -> schemars::generate::SchemaSettings {
    let mut restrict = schemars::transform::RestrictFormats::default();
    restrict.infer_from_meta_schema = false;
    restrict.allowed_formats = modproto::schema_formats::STANDARD_FORMATS
        .iter()
        .map(|f| (*f).into())
        .collect();
    let mut settings = schemars::generate::SchemaSettings::draft2020_12().with_transform(restrict);
    settings.meta_schema = None;
    settings
}

#[cfg(test)]
mod schema_tests {
    use super::*;

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Everything {
        count: u64,
        small: u8,
        index: usize,
        signed: i32,
        ratio: f64,
        maybe: Option<u32>,
        nested: Vec<Inner>,
        when: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(serde::Deserialize, JsonSchema)]
    struct Inner {
        size: u32,
    }

    fn formats(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(f)) = map.get("format") {
                    found.push(f.clone());
                }
                map.values().for_each(|v| formats(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| formats(v, found)),
            _ => {}
        }
    }

    #[test]
    fn derived_schemas_carry_no_non_standard_format_and_no_meta_schema() {
        let schema = schema_of::<Everything>();
        let mut found = Vec::new();
        formats(&schema, &mut found);
        assert!(
            found.is_empty(),
            "non-standard formats left: {found:?} in {schema}"
        );
        assert!(schema.get("$schema").is_none(), "{schema}");
        let props = &schema["properties"];
        assert_eq!(
            props["count"],
            serde_json::json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            props["index"],
            serde_json::json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            props["small"],
            serde_json::json!({"type": "integer", "minimum": 0, "maximum": 255})
        );
        assert_eq!(props["ratio"], serde_json::json!({"type": "number"}));
        // Definitions are transformed too, not only the root.
        assert_eq!(
            schema["$defs"]["Inner"]["properties"]["size"],
            serde_json::json!({"type": "integer", "minimum": 0})
        );
    }

    #[test]
    fn a_standard_format_is_kept() {
        #[allow(dead_code)]
        #[derive(serde::Deserialize, JsonSchema)]
        struct Address {
            ip: std::net::Ipv4Addr,
        }
        let schema = schema_of::<Address>();
        assert_eq!(schema["properties"]["ip"]["format"], "ipv4");
    }
}
