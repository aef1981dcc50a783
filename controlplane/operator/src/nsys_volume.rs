//! The Nsight Systems part of an injection (pure): a tool config with `backend: nsys` (or the
//! older `env` `NSIGHT_AGENT_BACKEND=nsys`) gets the cluster's nsys where the operator was told
//! of one (chart value `nsight-injector.nsys`, webhook flag `--nsys`), and every container's
//! agent the nsys backend and where nsys is.
//!
//! ```text
//! tool.wants_nsys() ──> settings.nsys
//!   ├─ HostPath(dir): volume nsight-nsys = hostPath dir (DirectoryOrCreate), read-only at
//!   │                 /opt/nsight-nsys in each container; NSIGHT_NSYS=/opt/nsight-nsys
//!   ├─ Image{image, dir}: initContainers += nsight-nsys (image, after the tools):
//!   │                 <tools>/nsight-agent install-nsys --from dir --to <tools>/nsys;
//!   │                 NSIGHT_NSYS=<tools>/nsys
//!   └─ none:          nsys on the container's own PATH (e.g. NGC images carry it)
//! every case: NSIGHT_AGENT_BACKEND=nsys; the annotation says where nsys comes from
//! ```
//! The agent finds the executable under the directory it is given (`nsight_agent::nsys_run::
//! locate`). Nothing here can stop the Pod: a node without the directory gets an empty one
//! (the agent then runs the program unprofiled and says why), and `install-nsys` always exits
//! 0, leaving the reason for the agent when the copy failed.

use k8s_openapi::api::core::v1::{Container, HostPathVolumeSource, Volume, VolumeMount};
use nsight_api::{chart::NsysSource, NsightToolConfig};

use crate::{patch::TOOLS_VOLUME, settings::Settings};

/// The annotation saying where the Pod's nsys comes from.
pub const ANNOTATION: &str = "nvidia.com/nsight-nsys";
/// The init container copying nsys out of the admin's image.
pub const INIT_CONTAINER: &str = "nsight-nsys";
/// The host-path volume's name.
pub const VOLUME: &str = "nsight-nsys";
/// Where the host path is mounted in each container.
pub const HOST_MOUNT: &str = "/opt/nsight-nsys";
/// The agent's setting: the nsys executable, or a directory to find it under.
pub const NSYS_ENV: &str = "NSIGHT_NSYS";

/// How one injected Pod gets nsys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nsys {
    /// The tool config does not ask for nsys.
    NotAsked,
    /// Asked for; the cluster provides none: the container's own PATH.
    FromPath,
    /// Asked for, from this source.
    Provided(NsysSource),
}

/// What a Pod injected with `tool` gets.
pub fn choose(tool: &NsightToolConfig, settings: &Settings) -> Nsys {
    match (tool.wants_nsys(), &settings.nsys) {
        (false, _) => Nsys::NotAsked,
        (true, None) => Nsys::FromPath,
        (true, Some(source)) => Nsys::Provided(source.clone()),
    }
}

/// The Pod's extra volume (host path only; an image's copy lands in the tools volume).
pub fn volume(nsys: &Nsys) -> Option<Volume> {
    let Nsys::Provided(NsysSource::HostPath(path)) = nsys else {
        return None;
    };
    Some(Volume {
        name: VOLUME.into(),
        host_path: Some(HostPathVolumeSource {
            path: path.clone(),
            // A node without nsys gets an empty directory rather than a Pod that cannot start.
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..Volume::default()
    })
}

/// Each container's extra mount (host path only).
pub fn mount(nsys: &Nsys) -> Option<VolumeMount> {
    matches!(nsys, Nsys::Provided(NsysSource::HostPath(_))).then(|| VolumeMount {
        name: VOLUME.into(),
        mount_path: HOST_MOUNT.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    })
}

/// The init container copying nsys from the admin's image into the tools volume, with the
/// agent the tools container put there (images with nsys have glibc; they need no shell).
pub fn init_container(nsys: &Nsys, settings: &Settings) -> Option<Container> {
    let Nsys::Provided(NsysSource::Image { image, dir }) = nsys else {
        return None;
    };
    let tools = &settings.tools_dir;
    Some(Container {
        name: INIT_CONTAINER.into(),
        image: Some(image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec![
            format!("{tools}/nsight-agent"),
            "install-nsys".into(),
            "--from".into(),
            dir.clone(),
            "--to".into(),
            copied_dir(settings),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: TOOLS_VOLUME.into(),
            mount_path: tools.clone(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    })
}

/// Where an image's nsys is copied: `<tools>/nsys`.
fn copied_dir(settings: &Settings) -> String {
    format!("{}/nsys", settings.tools_dir)
}

/// The agent's `NSIGHT_NSYS`, when the cluster provides nsys.
pub fn nsys_path(nsys: &Nsys, settings: &Settings) -> Option<String> {
    match nsys {
        Nsys::Provided(NsysSource::HostPath(_)) => Some(HOST_MOUNT.into()),
        Nsys::Provided(NsysSource::Image { .. }) => Some(copied_dir(settings)),
        Nsys::NotAsked | Nsys::FromPath => None,
    }
}

/// The Pod's annotation, when nsys is asked for.
pub fn note(nsys: &Nsys) -> Option<String> {
    match nsys {
        Nsys::NotAsked => None,
        Nsys::FromPath => Some(
            "nsys on the container's PATH (the operator provides none: set \
             nsight-injector.nsys.hostPath or .image)"
                .into(),
        ),
        Nsys::Provided(NsysSource::HostPath(path)) => {
            Some(format!("the node's {path}, read-only at {HOST_MOUNT}"))
        }
        Nsys::Provided(NsysSource::Image { image, dir }) => Some(format!(
            "{dir} of image {image}, copied by init container {INIT_CONTAINER}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::EnvVar;
    use nsight_api::ProfilerBackend;

    fn asking() -> NsightToolConfig {
        NsightToolConfig {
            name: "nsys".into(),
            backend: Some(ProfilerBackend::Nsys),
            ..NsightToolConfig::default()
        }
    }

    fn with(source: Option<NsysSource>) -> Settings {
        Settings {
            nsys: source,
            ..Settings::default()
        }
    }

    #[test]
    fn only_a_tool_config_asking_for_nsys_gets_it() {
        let host = with(Some(NsysSource::HostPath("/opt/nvidia/nsys".into())));
        assert_eq!(choose(&NsightToolConfig::default(), &host), Nsys::NotAsked);
        let nvtx = NsightToolConfig {
            backend: Some(ProfilerBackend::Nvtx),
            ..NsightToolConfig::default()
        };
        assert_eq!(choose(&nvtx, &host), Nsys::NotAsked);
        assert_eq!(
            choose(&asking(), &host),
            Nsys::Provided(NsysSource::HostPath("/opt/nvidia/nsys".into()))
        );
        // The older way: the tool config's own env.
        let by_env = NsightToolConfig {
            env: vec![EnvVar {
                name: "NSIGHT_AGENT_BACKEND".into(),
                value: Some("nsys".into()),
                ..EnvVar::default()
            }],
            ..NsightToolConfig::default()
        };
        assert!(matches!(choose(&by_env, &host), Nsys::Provided(_)));
        assert_eq!(choose(&asking(), &with(None)), Nsys::FromPath);
    }

    #[test]
    fn a_host_path_is_mounted_read_only_and_never_blocks_the_pod() {
        let settings = with(Some(NsysSource::HostPath("/opt/nvidia/nsys".into())));
        let nsys = choose(&asking(), &settings);
        let v = volume(&nsys).unwrap();
        let host = v.host_path.unwrap();
        assert_eq!(host.path, "/opt/nvidia/nsys");
        assert_eq!(host.type_.as_deref(), Some("DirectoryOrCreate"));
        let m = mount(&nsys).unwrap();
        assert_eq!(
            (m.mount_path.as_str(), m.read_only),
            (HOST_MOUNT, Some(true))
        );
        assert_eq!(init_container(&nsys, &settings), None);
        assert_eq!(nsys_path(&nsys, &settings).as_deref(), Some(HOST_MOUNT));
        assert!(note(&nsys).unwrap().contains("the node's /opt/nvidia/nsys"));
    }

    #[test]
    fn an_image_is_copied_into_the_tools_volume_by_the_agent() {
        let settings = with(Some(NsysSource::Image {
            image: "registry.example/nsys:2025.3".into(),
            dir: "/opt/nvidia/nsight-systems".into(),
        }));
        let nsys = choose(&asking(), &settings);
        assert_eq!((volume(&nsys), mount(&nsys)), (None, None));
        let init = init_container(&nsys, &settings).unwrap();
        assert_eq!(init.image.as_deref(), Some("registry.example/nsys:2025.3"));
        assert_eq!(
            init.command.unwrap(),
            [
                "/nsight-tools/nsight-agent",
                "install-nsys",
                "--from",
                "/opt/nvidia/nsight-systems",
                "--to",
                "/nsight-tools/nsys"
            ]
        );
        let mounts = init.volume_mounts.unwrap();
        assert_eq!(
            mounts[0].read_only, None,
            "the copy writes the tools volume"
        );
        assert_eq!(
            nsys_path(&nsys, &settings).as_deref(),
            Some("/nsight-tools/nsys")
        );
    }

    #[test]
    fn without_a_cluster_nsys_the_annotation_says_how_to_provide_one() {
        let nsys = choose(&asking(), &with(None));
        assert_eq!((volume(&nsys), nsys_path(&nsys, &with(None))), (None, None));
        assert!(note(&nsys)
            .unwrap()
            .contains("nsight-injector.nsys.hostPath"));
        assert_eq!(note(&Nsys::NotAsked), None);
    }
}
