package host

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DockerSocket resolves the Docker Engine socket awf talks to, the same way
// for awf run and awf isolate verify/matrix: the explicit socket
// (--docker-socket or boundedQueries.dockerSocket) wins, then DOCKER_HOST
// when it names a Unix socket (unix:///path), then DefaultDockerSocket.
// Only a local Unix socket is accepted: a DOCKER_HOST naming a TCP, SSH or
// any other daemon is an error, since a remote engine would run the sandbox
// outside this host's controls. source says where the path came from, for
// messages.
func DockerSocket(explicit, dockerHost string) (path, source string, err error) {
	if explicit != "" {
		return explicit, "the configured socket", nil
	}
	if dockerHost == "" {
		return DefaultDockerSocket, "the default", nil
	}
	p, ok := strings.CutPrefix(dockerHost, "unix://")
	if !ok {
		scheme, _, _ := strings.Cut(dockerHost, "://")
		return "", "DOCKER_HOST", fmt.Errorf("DOCKER_HOST=%s names a %s daemon; awf supports only a local Unix socket (DOCKER_HOST=unix:///path, --docker-socket or boundedQueries.dockerSocket)", dockerHost, scheme)
	}
	if !filepath.IsAbs(p) {
		return "", "DOCKER_HOST", fmt.Errorf("DOCKER_HOST=%s: the Unix socket path must be absolute", dockerHost)
	}
	return filepath.Clean(p), "DOCKER_HOST", nil
}
