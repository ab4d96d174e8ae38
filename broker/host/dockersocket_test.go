package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDockerSocket(t *testing.T) {
	cases := []struct {
		name, explicit, dockerHost string
		want, source, err          string
	}{
		{"default", "", "", DefaultDockerSocket, "the default", ""},
		{"DOCKER_HOST unix", "", "unix:///run/user/1000/docker.sock", "/run/user/1000/docker.sock", "DOCKER_HOST", ""},
		{"DOCKER_HOST unclean", "", "unix:///run//d/../docker.sock", "/run/docker.sock", "DOCKER_HOST", ""},
		{"explicit wins over DOCKER_HOST", "/srv/d.sock", "unix:///run/other.sock", "/srv/d.sock", "the configured socket", ""},
		{"explicit wins over a tcp DOCKER_HOST", "/srv/d.sock", "tcp://10.0.0.1:2375", "/srv/d.sock", "the configured socket", ""},
		{"tcp refused", "", "tcp://127.0.0.1:2375", "", "", "names a tcp daemon"},
		{"ssh refused", "", "ssh://me@host", "", "", "only a local Unix socket"},
		{"relative unix refused", "", "unix://docker.sock", "", "", "must be absolute"},
		{"bare path refused", "", "/var/run/docker.sock", "", "", "only a local Unix socket"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := DockerSocket(tc.explicit, tc.dockerHost)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.source, src)
		})
	}
}
