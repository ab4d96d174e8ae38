package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// TestRootPageCacheNotShared is the page-cache channel between two
// invocations. The host first drops the carrier files from its page cache
// (as memory pressure does to rarely read files); the sender then loads
// the first page of each file its secret's set bits name, and the receiver
// times each page's first read (and uses mincore where the policy allows
// it). Every sandbox reads its root through a superblock of its own, so
// the receiver must decode at chance; on the shared root this decoded
// 64/64 on every runtime. The probe run as one invocation must decode the
// secret, so the receiver is known to work on this host.
func TestRootPageCacheNotShared(t *testing.T) {
	r := newTestRuntime(t)
	probe := func(mode residency.Mode, secret uint64) isolate.Outcome {
		t.Helper()
		o := run(t, r, template(t, r, ""), string(residency.Script(mode, secret)))
		require.Equal(t, isolate.KindOK, o.Kind, "%s: %s\nstderr: %s", mode, o.Detail, o.Stderr)
		return o
	}
	control, err := residency.Secret()
	require.NoError(t, err)
	evict := func() {
		// The image layer is what containers used to share; drop its
		// carriers too, so that a shared page cache would show.
		require.NoError(t, residency.EvictCarriers(testRoot))
		if dir := layerDir(t, r); dir != "" {
			require.NoError(t, residency.EvictCarriers(dir))
		}
	}
	evict()
	res, err := residency.Parse(probe(residency.Both, control).Output)
	require.NoError(t, err)
	t.Logf("positive control (one invocation): %d/64 by timing, ns %v", residency.Correct(res.Timing, control), res.Ns)
	require.GreaterOrEqual(t, residency.Correct(res.Timing, control), residency.ControlMin,
		"the receiver cannot tell a page it loaded itself: the probe proves nothing here")

	secret, err := residency.Secret()
	require.NoError(t, err)
	evict()
	probe(residency.Send, secret)
	res, err = residency.Parse(probe(residency.Recv, 0).Output)
	require.NoError(t, err)
	got := residency.Correct(res.Timing, secret)
	t.Logf("two invocations: %d/64 by timing, ns %v", got, res.Ns)
	require.LessOrEqual(t, got, residency.ChanceMax, "a later container reads the pages an earlier one loaded")
	if res.Mincore != nil {
		require.LessOrEqual(t, residency.Correct(*res.Mincore, secret), residency.ChanceMax, "mincore shows an earlier container's pages")
	}
}

// layerDir is the host directory of the rootfs image's layer, when the
// Engine's storage driver names one (overlay2 does), else "".
func layerDir(t *testing.T, r *Runtime) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := r.image(ctx, testRoot)
	require.NoError(t, err)
	var img struct {
		GraphDriver struct {
			Data map[string]string `json:"Data"`
		} `json:"GraphDriver"`
	}
	require.NoError(t, r.eng.call(ctx, http.MethodGet, "/images/"+id+"/json", nil, nil, &img))
	return img.GraphDriver.Data["UpperDir"]
}

// rootDevScript reports which filesystem the root's parts live on.
const rootDevScript = `import json, os
d = lambda p: os.stat(p).st_dev
json.dump({"root": d("/"), "usr": d("/usr"), "passwd": d("/etc/passwd"), "group": d("/etc/group"), "python": d("/usr/bin/python3"),
           "stdlib": d("/usr/lib/python3.11/os.py"), "lib64": d("/lib64/"), "lib": d("/lib/")}, open("/query/out", "w"))
`

// TestRootFilesComeFromOwnMount checks inside a container that the
// interpreter, its libraries (through the /lib and /lib64 links), the
// stdlib and the files of /etc are all on one filesystem that is not the
// image's root.
func TestRootFilesComeFromOwnMount(t *testing.T) {
	r := newTestRuntime(t)
	o := run(t, r, template(t, r, ""), rootDevScript)
	require.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)
	var dev map[string]uint64
	require.NoError(t, json.Unmarshal(o.Output, &dev))
	require.NotEqual(t, dev["root"], dev["usr"], "/usr is the shared image layer")
	for _, k := range []string{"passwd", "group", "python", "stdlib", "lib64", "lib"} {
		require.Equal(t, dev["usr"], dev[k], "%s is not on the sandbox's own root mount", k)
	}
}

// TestBuildCreateBindsRootDirs checks the rendering: the root directories
// are read-only binds from the sandbox's own mount, ahead of the others.
func TestBuildCreateBindsRootDirs(t *testing.T) {
	ms := rootBinds("/state/ws/root", []string{"etc/passwd", "usr"})
	require.Equal(t, []mount{
		{Type: "bind", Source: "/state/ws/root/etc/passwd", Target: "/etc/passwd", ReadOnly: true, BindOptions: &bindOptions{Propagation: "rprivate"}},
		{Type: "bind", Source: "/state/ws/root/usr", Target: "/usr", ReadOnly: true, BindOptions: &bindOptions{Propagation: "rprivate"}},
	}, ms)
}
