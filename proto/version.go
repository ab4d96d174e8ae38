package proto

import (
	"runtime/debug"
	"strings"
)

// Version is awf's version string, the same in every report, audit record and
// "awf version": the main module's version ("devel" for a checkout build),
// then "+" and the first 12 hex digits of the VCS revision when the binary
// was built from a git checkout, then ".modified" when that checkout had
// uncommitted changes. It lives in proto because proto imports nothing of
// awf's and everything else imports proto, so every package can stamp it
// without a new edge in the import graph; reading the build info is no I/O.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionFrom(bi)
}

// versionFrom formats a build info as Version describes.
func versionFrom(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	rev, modified := BuildRevision(bi)
	// A module version from the proxy already names its commit; a pseudo-
	// version carries the revision, so only add what is not there.
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += "+" + rev[:min(12, len(rev))]
	}
	if modified && !strings.Contains(v, "+dirty") {
		v += ".modified"
	}
	return v
}

// BuildRevision is the VCS revision a binary was built from and whether
// that checkout had uncommitted changes, as the Go toolchain stamped them in
// its build info: the one reader of those settings, for Version and for
// verify's pins.
func BuildRevision(bi *debug.BuildInfo) (rev string, modified bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}
