//! The models a person can pick from: each provider's list (`GET /api/v1/models`), asked for
//! once, when a model field is first focused or a provider chosen (not on every page load:
//! listing asks every provider), offered as a `<datalist>` under the model field so a name can
//! still be typed.

use leptos::prelude::*;
use llooma_types::ProviderModels;

use crate::api;

/// The providers' models; `None` until they arrived.
#[derive(Clone, Copy)]
pub struct ModelChoices(RwSignal<Option<Vec<ProviderModels>>>, StoredValue<bool>);

impl ModelChoices {
    pub fn new() -> Self {
        ModelChoices(RwSignal::new(None), StoredValue::new(false))
    }

    /// Asks for the lists, once.
    pub fn load(self) {
        if self.1.get_value() {
            return;
        }
        self.1.set_value(true);
        api::spawn(async move {
            let list = match api::call("GET", "/api/v1/models", None, None).await {
                Ok(list) => serde_json::from_value::<Vec<ProviderModels>>(list).unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            self.0.set(Some(list));
        });
    }

    /// Whether the lists say `model` of `provider_id` sees images (tracked); `None` until
    /// they arrived. A model they do not hold does not.
    pub fn sees_images(self, provider_id: &str, model: &str) -> Option<bool> {
        self.0.with(|lists| {
            let lists = lists.as_ref()?;
            Some(
                lists
                    .iter()
                    .filter(|p| p.provider_id == provider_id)
                    .flat_map(|p| p.models.iter())
                    .any(|m| m.id == model && m.sees_images),
            )
        })
    }

    /// The models of `provider_id` (tracked: a view or effect reading it follows the lists).
    pub fn of(self, provider_id: &str) -> Vec<String> {
        self.0.with(|lists| {
            lists
                .iter()
                .flatten()
                .filter(|p| p.provider_id == provider_id)
                .flat_map(|p| p.models.iter().map(|m| m.id.clone()))
                .collect()
        })
    }
}

/// The suggestions of a model field (`list=id`): the chosen provider's models.
#[component]
pub fn ModelDatalist(
    id: &'static str,
    choices: ModelChoices,
    provider: RwSignal<String>,
) -> impl IntoView {
    view! {
        <datalist id=id>
            {move || {
                choices
                    .of(&provider.get())
                    .into_iter()
                    .map(|model| view! { <option value=model></option> })
                    .collect_view()
            }}
        </datalist>
    }
}
