//! The write side of a reconcile, a thin layer over the kube client: server-side apply of the
//! desired objects with one field manager, deletion of owned objects no longer desired (found by
//! the owner's labels), and the status patch.
//!
//! Decides nothing: what to write comes from `render` and `conditions`.

use std::fmt::Debug;

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::{ConfigMap, Secret, Service, ServiceAccount},
        networking::v1::NetworkPolicy,
        rbac::v1::{Role, RoleBinding},
    },
    NamespaceResourceScope,
};
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    Api, Client, Resource,
};
use nsight_api::NsightStatus;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::json;

use super::Error;
use crate::render::{owned_selector, Desired, Object, ObjectKind, MANAGER};

fn params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Server-side applies `object` unless an object of that name is controlled by another owner
/// (two custom resources of different kinds with the same name in one namespace): taking it
/// over would make the two controllers fight forever.
async fn apply_one<K>(client: &Client, namespace: &str, object: &K, name: &str) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let kind = || K::kind(&()).into_owned();
    let apply_error = |source| Error::Apply {
        kind: kind(),
        name: name.into(),
        source,
    };
    let ours = object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone());
    if let Some(existing) = api.get_metadata_opt(name).await.map_err(apply_error)? {
        let controller = existing
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true));
        if let Some(other) = controller.filter(|c| Some(&c.uid) != ours.as_ref()) {
            return Err(Error::Conflict {
                kind: kind(),
                name: name.into(),
                owner: format!("{} {}", other.kind, other.name),
            });
        }
    }
    api.patch(name, &params(), &Patch::Apply(object))
        .await
        .map_err(apply_error)
}

/// Creates `secret` unless a Secret of that name exists: generated credentials are never
/// overwritten (nor read back).
async fn create_once(
    client: &Client,
    namespace: &str,
    secret: &Secret,
    name: &str,
) -> Result<(), Error> {
    match Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), secret)
        .await
    {
        Ok(_) => {
            tracing::info!(namespace, name, "created a generated Secret");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Apply {
            kind: "Secret".into(),
            name: name.into(),
            source,
        }),
    }
}

/// Applies a StatefulSet; when the server refuses the change because it touches a field it
/// keeps immutable (volume claim templates: persistence switched on or off), deletes the
/// StatefulSet (its volume claims stay) and creates it anew.
async fn apply_stateful_set(
    client: &Client,
    namespace: &str,
    set: &StatefulSet,
    name: &str,
) -> Result<StatefulSet, Error> {
    match apply_one(client, namespace, set, name).await {
        Err(Error::Apply {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 422 && status.message.contains("Forbidden") => {
            tracing::info!(
                namespace,
                name,
                "recreating a StatefulSet to change an immutable field"
            );
            let api = Api::<StatefulSet>::namespaced(client.clone(), namespace);
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(source) => {
                    return Err(Error::Delete {
                        kind: "StatefulSet".into(),
                        name: name.into(),
                        source,
                    })
                }
            }
            apply_one(client, namespace, set, name).await
        }
        other => other,
    }
}

/// A workload as the server stored it after the apply (with its status).
#[derive(Clone, Debug)]
pub enum Applied {
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    DaemonSet(Box<DaemonSet>),
}

impl Applied {
    pub fn deployment(&self) -> Option<&Deployment> {
        match self {
            Applied::Deployment(d) => Some(d),
            _ => None,
        }
    }
}

/// Applies every desired object in order (Secrets: created once); returns the workloads as the
/// server stored them.
pub async fn apply_objects(
    client: &Client,
    namespace: &str,
    desired: &Desired,
) -> Result<Vec<Applied>, Error> {
    let mut applied = Vec::new();
    for object in &desired.objects {
        let name = object.name();
        match object {
            Object::ServiceAccount(o) => {
                apply_one(client, namespace, o, name).await?;
            }
            Object::ConfigMap(o) => {
                apply_one(client, namespace, o, name).await?;
            }
            Object::Service(o) => {
                apply_one(client, namespace, &**o, name).await?;
            }
            Object::Deployment(o) => {
                let d = apply_one(client, namespace, &**o, name).await?;
                applied.push(Applied::Deployment(Box::new(d)));
            }
            Object::Secret(o) => create_once(client, namespace, o, name).await?,
            Object::Role(o) => {
                apply_one(client, namespace, o, name).await?;
            }
            Object::RoleBinding(o) => {
                apply_one(client, namespace, o, name).await?;
            }
            Object::StatefulSet(o) => {
                let s = apply_stateful_set(client, namespace, o, name).await?;
                applied.push(Applied::StatefulSet(Box::new(s)));
            }
            Object::DaemonSet(o) => {
                let d = apply_one(client, namespace, &**o, name).await?;
                applied.push(Applied::DaemonSet(Box::new(d)));
            }
            Object::NetworkPolicy(o) => {
                apply_one(client, namespace, &**o, name).await?;
            }
        }
    }
    Ok(applied)
}

/// Applies every desired object in order; returns the Deployments as the server stored them
/// (with their status).
pub async fn apply_all(
    client: &Client,
    namespace: &str,
    desired: &Desired,
) -> Result<Vec<Deployment>, Error> {
    Ok(apply_objects(client, namespace, desired)
        .await?
        .into_iter()
        .filter_map(|a| match a {
            Applied::Deployment(d) => Some(*d),
            _ => None,
        })
        .collect())
}

async fn prune<K>(api: Api<K>, selector: &str, keep: &[&str]) -> Result<usize, Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let kind = K::kind(&()).into_owned();
    let listed = api
        .list_metadata(&ListParams::default().labels(selector))
        .await
        .map_err(|source| Error::List {
            kind: kind.clone(),
            source,
        })?;
    let mut deleted = 0;
    for item in listed.items {
        let Some(name) = item.metadata.name else {
            continue;
        };
        if keep.contains(&name.as_str()) || item.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => deleted += 1,
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(source) => {
                return Err(Error::Delete {
                    kind: kind.clone(),
                    name,
                    source,
                })
            }
        }
        tracing::info!(kind, name, "deleted an owned object no longer desired");
    }
    Ok(deleted)
}

/// Deletes what the owner `owner_kind`/`owner` labelled as its own but no longer desires;
/// returns how many objects were deleted.
pub async fn collect_garbage(
    client: &Client,
    namespace: &str,
    owner_kind: &str,
    owner: &str,
    desired: &Desired,
) -> Result<usize, Error> {
    collect_garbage_of(
        client,
        namespace,
        owner_kind,
        owner,
        desired,
        &ObjectKind::ALL,
    )
    .await
}

/// [`collect_garbage`] over the object kinds `kinds` (what the owner's kind can own). Secrets
/// are never pruned (generated credentials live as long as their owner).
pub async fn collect_garbage_of(
    client: &Client,
    namespace: &str,
    owner_kind: &str,
    owner: &str,
    desired: &Desired,
    kinds: &[ObjectKind],
) -> Result<usize, Error> {
    let selector = owned_selector(owner_kind, owner);
    let mut deleted = 0;
    for &kind in kinds {
        let keep = desired.names(kind);
        let c = client.clone();
        deleted += match kind {
            ObjectKind::ServiceAccount => {
                prune(
                    Api::<ServiceAccount>::namespaced(c, namespace),
                    &selector,
                    &keep,
                )
                .await?
            }
            ObjectKind::ConfigMap => {
                prune(Api::<ConfigMap>::namespaced(c, namespace), &selector, &keep).await?
            }
            ObjectKind::Service => {
                prune(Api::<Service>::namespaced(c, namespace), &selector, &keep).await?
            }
            ObjectKind::Deployment => {
                prune(
                    Api::<Deployment>::namespaced(c, namespace),
                    &selector,
                    &keep,
                )
                .await?
            }
            ObjectKind::Secret => 0,
            ObjectKind::Role => {
                prune(Api::<Role>::namespaced(c, namespace), &selector, &keep).await?
            }
            ObjectKind::RoleBinding => {
                prune(
                    Api::<RoleBinding>::namespaced(c, namespace),
                    &selector,
                    &keep,
                )
                .await?
            }
            ObjectKind::StatefulSet => {
                prune(
                    Api::<StatefulSet>::namespaced(c, namespace),
                    &selector,
                    &keep,
                )
                .await?
            }
            ObjectKind::DaemonSet => {
                prune(Api::<DaemonSet>::namespaced(c, namespace), &selector, &keep).await?
            }
            ObjectKind::NetworkPolicy => {
                prune(
                    Api::<NetworkPolicy>::namespaced(c, namespace),
                    &selector,
                    &keep,
                )
                .await?
            }
        };
    }
    Ok(deleted)
}

/// Server-side applies `status`, with the kind's own members `extra` (a streamer's `url`), to
/// the status subresource of `K` `name`. A member left out of `extra` is removed (the manager
/// owns the whole status).
pub async fn patch_status<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &NsightStatus,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let mut status = serde_json::to_value(status).unwrap_or_default();
    if let Some(members) = status.as_object_mut() {
        members.extend(extra.clone());
    }
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    Api::<K>::namespaced(client.clone(), namespace)
        .patch_status(name, &params(), &Patch::Apply(&body))
        .await
        .map(|_| ())
        .map_err(Error::Status)
}
