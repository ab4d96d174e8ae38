package proto

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionFrom(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "1cec83d4e5f60718293a4b5c6d7e8f9012345678"}}
	dirty := append([]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, rev...)
	clean := append([]debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}, rev...)
	cases := []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"checkout build, no vcs", "(devel)", nil, "devel"},
		{"empty version", "", nil, "devel"},
		{"checkout build, clean", "(devel)", clean, "devel+1cec83d4e5f6"},
		{"checkout build, dirty", "(devel)", dirty, "devel+1cec83d4e5f6.modified"},
		{"tagged module", "v1.2.3", nil, "v1.2.3"},
		{"tagged module with vcs", "v1.2.3", clean, "v1.2.3+1cec83d4e5f6"},
		{"pseudo-version names its commit", "v0.0.0-20261201193342-1cec83d4e5f6", clean, "v0.0.0-20261201193342-1cec83d4e5f6"},
		{"go1.24 dirty pseudo-version", "v0.0.0-20261201193342-1cec83d4e5f6+dirty", dirty, "v0.0.0-20261201193342-1cec83d4e5f6+dirty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: tc.version}, Settings: tc.settings}
			assert.Equal(t, tc.want, versionFrom(bi))
		})
	}
	assert.NotEmpty(t, Version())
}
