paths = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
         "/run/podman/podman.sock", "/var/run/crio/crio.sock", "/run/awf", "/var/run/awf",
         "/run/buildkit/buildkitd.sock", "/run/systemd/private", "/run/dbus/system_bus_socket"]
seen = [p for p in paths if os.path.lexists(p)]
answer({"visible": len(seen)})
