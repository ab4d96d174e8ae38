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

// evictRoot drops the carriers of the page-cache channel (the suite's
// "root page cache not shared", see isolatetest.RootPageCacheNotShared)
// from the rootfs and from the image layer, which is what containers used
// to share, so that a shared page cache would show.
func evictRoot(t testing.TB, r *Runtime) {
	require.NoError(t, residency.EvictCarriers(testRoot))
	if dir := layerDir(t, r); dir != "" {
		require.NoError(t, residency.EvictCarriers(dir))
	}
}

// layerDir is the host directory of the rootfs image's layer, when the
// Engine's storage driver names one (overlay2 does), else "".
func layerDir(t testing.TB, r *Runtime) string {
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
