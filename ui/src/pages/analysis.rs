//! The analysis tab: the recipe catalog, the chosen recipe's argument form (generated from the
//! arguments it declares: `nsight_contracts::form` decides each field's kind, default and
//! checks), the job's input (a session of the tag, maybe one collection), and below it the jobs
//! (`pages::jobs`). Data: `GET /recipes`, `GET /sessions?tag`; `POST /jobs` runs the recipe and
//! opens the new job.

use std::collections::BTreeMap;

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::{
    analysis::{JobRequest, RecipeView},
    form::{ArgumentField, FieldKind, RecipeForm},
};

use crate::{
    api,
    app::Shared,
    components::notice::{Notice, NoticeLine},
    pages::jobs::{JobDetail, JobsList},
    route::{go, Link},
};

/// One generated field: a select for a choice, a text box otherwise, its description and the
/// error of the last check (announced, and tied to the box by `aria-describedby`).
fn field_view(
    field: ArgumentField,
    values: RwSignal<BTreeMap<String, String>>,
    errors: RwSignal<BTreeMap<String, String>>,
) -> impl IntoView {
    let name = field.name.clone();
    let id = format!("arg-{name}");
    let help = format!("{id}-help");
    let err = format!("{id}-error");
    let described = format!("{help} {err}");
    let get = {
        let name = name.clone();
        move || values.with(|v| v.get(&name).cloned().unwrap_or_default())
    };
    let set = {
        let name = name.clone();
        move |ev: leptos::ev::Event| {
            let value = event_target_value(&ev);
            values.update(|v| {
                v.insert(name.clone(), value);
            });
        }
    };
    let error = {
        let name = name.clone();
        move || errors.with(|e| e.get(&name).cloned())
    };
    let invalid = {
        let error = error.clone();
        move || error().is_some().then_some("true")
    };
    let input = match &field.kind {
        FieldKind::Choice(choices) => {
            let options = choices
                .iter()
                .map(|c| view! { <option value=c.clone()>{c.clone()}</option> })
                .collect_view();
            view! {
                <select id=id.clone() name=name.clone() data-testid=format!("arg-{name}")
                    aria-describedby=described.clone() aria-invalid=invalid.clone()
                    prop:value=get.clone() on:change=set.clone()>
                    <option value="">"(recipe default)"</option>
                    {options}
                </select>
            }
            .into_any()
        }
        kind => {
            let numeric = matches!(kind, FieldKind::Number { .. });
            view! {
                <input id=id.clone() name=name.clone() data-testid=format!("arg-{name}") type="text"
                    inputmode=numeric.then_some("decimal")
                    placeholder=field.default.clone().unwrap_or_default()
                    aria-describedby=described.clone() aria-invalid=invalid
                    prop:value=get on:input=set/>
            }
            .into_any()
        }
    };
    let range = match &field.kind {
        FieldKind::Number { integer, min, max } => {
            let whole = if *integer {
                "a whole number"
            } else {
                "a number"
            };
            match (min, max) {
                (Some(lo), Some(hi)) => format!(" ({whole} from {lo} to {hi})"),
                _ => format!(" ({whole})"),
            }
        }
        _ => String::new(),
    };
    let default = field
        .default
        .clone()
        .map(|d| format!(" Default: {d}."))
        .unwrap_or_default();
    view! {
        <div class="field">
            <label for=id>{format!("--{name}")}</label>
            {input}
            <small id=help>{format!("{}{range}{default}", field.description)}</small>
            <span id=err class="field-error" role="alert" data-testid=format!("arg-{}-error", field.name)>{error}</span>
        </div>
    }
}

/// The form of one recipe: input, generated fields, run.
#[component]
fn RecipeFormView(shared: Shared, recipe: RecipeView) -> impl IntoView {
    let form = RecipeForm::of(&recipe.arguments);
    let defaults: BTreeMap<String, String> = form
        .fields
        .iter()
        .map(|f| (f.name.clone(), f.default.clone().unwrap_or_default()))
        .collect();
    let values = RwSignal::new(defaults);
    let errors = RwSignal::new(BTreeMap::<String, String>::new());
    let notice = RwSignal::new(None::<Notice>);
    let busy = RwSignal::new(false);
    let tag = shared.view.with_untracked(|v| v.tag.clone());
    let sessions = LocalResource::new({
        let tag = tag.clone();
        move || api::sessions(Some(tag.clone()), None)
    });
    let session = RwSignal::new(
        shared
            .view
            .with_untracked(|v| v.session.clone().unwrap_or_default()),
    );
    let collection = RwSignal::new(
        shared
            .view
            .with_untracked(|v| v.collection.clone().unwrap_or_default()),
    );
    let name = recipe.name.clone();
    let fields = form.fields.clone();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let typed = values.get_untracked();
        let args = match form.command_line(|n| typed.get(n).cloned().unwrap_or_default()) {
            Ok(args) => {
                errors.set(BTreeMap::new());
                args
            }
            Err(list) => {
                let count = list.len();
                errors.set(list.into_iter().map(|e| (e.name, e.message)).collect());
                notice.set(Some(Notice::Failed(format!(
                    "{count} argument(s) need fixing"
                ))));
                return;
            }
        };
        let session_id = session.get_untracked().trim().to_owned();
        if session_id.is_empty() {
            notice.set(Some(Notice::Failed(
                "choose the session whose reports the recipe reads".to_owned(),
            )));
            return;
        }
        let collection_id =
            Some(collection.get_untracked().trim().to_owned()).filter(|c| !c.is_empty());
        let request = JobRequest {
            recipe: name.clone(),
            args,
            session: Some(session_id),
            collection: collection_id,
            inputs: None,
            tag: Some(tag.clone()),
        };
        busy.set(true);
        spawn_local(async move {
            match api::run_job(request).await {
                Ok(job) => {
                    // Its status lives in the job's detail below, which opens now.
                    notice.set(Some(Notice::Done(format!(
                        "Sent job {}: see its status below",
                        job.id
                    ))));
                    let mut to = shared.view.get_untracked();
                    to.job = Some(job.id.to_string());
                    go(shared, to);
                    shared.refresh();
                }
                Err(e) => notice.set(Some(Notice::Failed(format!("The job was refused: {e}")))),
            }
            busy.set(false);
        });
    };
    let session_options = move || {
        let current = session.get();
        let mut ids: Vec<(String, String)> = sessions
            .get()
            .and_then(Result::ok)
            .map(|l| {
                l.sessions
                    .into_iter()
                    .rev()
                    .map(|s| {
                        let label = match &s.title {
                            Some(t) => format!("{} “{t}” ({})", s.id, s.state.as_str()),
                            None => format!("{} ({})", s.id, s.state.as_str()),
                        };
                        (s.id.to_string(), label)
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !current.is_empty() && !ids.iter().any(|(id, _)| *id == current) {
            ids.insert(0, (current.clone(), current.clone()));
        }
        ids.into_iter()
            .map(|(id, label)| view! { <option value=id.clone() selected={id == current}>{label}</option> })
            .collect_view()
    };
    view! {
        <form class="recipe-form" data-testid="recipe-form" on:submit=submit novalidate>
            <h3>{format!("{} ({})", recipe.display_name, recipe.name)}</h3>
            <p>{recipe.description.clone()}</p>
            <fieldset>
                <legend>"Reports"</legend>
                <div class="field">
                    <label for="job-session">"Session"</label>
                    <select id="job-session" data-testid="job-session" prop:value=move || session.get()
                        on:change=move |ev| session.set(event_target_value(&ev))>
                        <option value="">"(choose a session)"</option>
                        {session_options}
                    </select>
                </div>
                <div class="field">
                    <label for="job-collection">"Collection"</label>
                    <input id="job-collection" data-testid="job-collection" inputmode="numeric" placeholder="all collections"
                        prop:value=move || collection.get() on:input=move |ev| collection.set(event_target_value(&ev))/>
                </div>
            </fieldset>
            <fieldset>
                <legend>"Arguments"</legend>
                {if fields.is_empty() { Some(view! { <p>"This recipe takes no arguments."</p> }) } else { None }}
                {fields.into_iter().map(|f| field_view(f, values, errors)).collect_view()}
            </fieldset>
            <button type="submit" data-testid="run-recipe" disabled=move || busy.get()>"Run"</button>
            <NoticeLine notice testid="run-notice"/>
        </form>
    }
}

#[component]
pub fn AnalysisPage(shared: Shared) -> impl IntoView {
    // Not fetched again on refresh: the catalog changes only with a new deployment, and the
    // form built from it keeps what was typed.
    let recipes = LocalResource::new(api::recipes);
    let chosen = Memo::new(move |_| shared.view.with(|v| v.recipe.clone()));
    let job = Memo::new(move |_| shared.view.with(|v| v.job.clone()));
    let catalog = move || {
        match recipes.get() {
        None => view! { <p data-testid="recipes-loading">"Loading recipes…"</p> }.into_any(),
        Some(Err(e)) => view! { <p role="alert" data-testid="recipes-error">{format!("Cannot list recipes: {e}")}</p> }.into_any(),
        Some(Ok(list)) if list.recipes.is_empty() => view! { <p data-testid="recipes-empty">"The analysis service offers no recipes."</p> }.into_any(),
        Some(Ok(list)) => {
            let current = chosen.get();
            let items = list.recipes.into_iter().map(|r| {
                let mut to = shared.view.get_untracked();
                to.recipe = Some(r.name.clone());
                to.job = None;
                let is = current.as_deref() == Some(r.name.as_str());
                view! {
                    <li>
                        <Link shared to testid=format!("recipe-{}", r.name) current=is>{r.display_name.clone()}</Link>
                        " " <code>{r.name.clone()}</code>
                    </li>
                }
            });
            view! { <ul class="recipes" data-testid="recipes">{items.collect_view()}</ul> }.into_any()
        }
    }
    };
    let form = move || {
        let name = chosen.get()?;
        let recipe = recipes
            .get()
            .and_then(Result::ok)?
            .recipes
            .into_iter()
            .find(|r| r.name == name);
        Some(match recipe {
            Some(recipe) => view! { <RecipeFormView shared recipe/> }.into_any(),
            None => view! { <p role="alert">{format!("The analysis service has no recipe {name}.")}</p> }.into_any(),
        })
    };
    view! {
        <div class="analysis">
            <section aria-labelledby="recipes-heading" class="catalog">
                <h2 id="recipes-heading">"Recipes"</h2>
                {catalog}
            </section>
            <section aria-label="Run a recipe" class="run">{form}</section>
        </div>
        <JobsList shared/>
        {move || job.get().map(|id| view! { <JobDetail shared id/> })}
    }
}
